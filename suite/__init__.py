"""Reference benchmark suite for distributed GAN training."""

__version__ = "0.1.0"
