"""The training core: communication engines, strategies, the training loop and checkpoints."""
