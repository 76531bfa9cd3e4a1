"""Measurement: step timers and samplers (telemetry), peaks (flops), traces (tracing), the environment (env),
image quality (metrics) and the alpha-beta network model (network)."""
