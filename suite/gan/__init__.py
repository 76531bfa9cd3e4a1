"""The GAN being trained: networks, losses, data, seeds, sampling and the divergence rules (no communication)."""
