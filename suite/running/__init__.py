"""Running runs: launch commands (launch), batch scripts (jobscript) and their site presets (sites), the
per-rank worker, the results folder's lock, the GPU self-check and the network probe."""
