"""Lipizzaner's perceptrons (paper 003, Table 1, MNIST column): the ``mlp`` architecture.

Two hidden layers of 256 with tanh on each side; the generator's outputs follow the image size (784
for 28 x 28 MNIST, 64 on the 8 x 8 digits). As with the DC-GAN pair (:mod:`suite.gan.models`) the
discriminator returns the raw score; a conditional pair (which Table 1 does not have) conditions as
the DC-CGAN does (docs/strategies.md). The networks keep PyTorch's default initialisation, drawn
from the seed alone.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .models import projection_score

HIDDEN = (256, 256)
"""Neurons of the two hidden layers (Table 1)."""


def _perceptron(inputs: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in HIDDEN:
        layers += [nn.Linear(inputs, width), nn.Tanh()]
        inputs = width
    return nn.Sequential(*layers)


class MLPGenerator(nn.Module):
    """Table 1's generator: ``latent_dim`` (+ classes) inputs, two tanh layers of 256, ``channels * size**2`` tanh outputs."""

    def __init__(self, image_size: int, channels: int, latent_dim: int = 64, num_classes: int = 0):
        super().__init__()
        self.image_size, self.channels, self.latent_dim, self.num_classes = image_size, channels, latent_dim, num_classes
        self.hidden = _perceptron(latent_dim + num_classes)
        self.output = nn.Sequential(nn.Linear(HIDDEN[-1], channels * image_size * image_size), nn.Tanh())

    def forward(self, z: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.num_classes:
            if labels is None:
                raise ValueError("a conditional generator needs the labels to generate")
            z = torch.cat([z, F.one_hot(labels, self.num_classes).to(z.dtype)], dim=1)
        return self.output(self.hidden(z)).view(z.shape[0], self.channels, self.image_size, self.image_size)


class MLPDiscriminator(nn.Module):
    """Table 1's discriminator: the flattened image, two tanh layers of 256, one raw score."""

    def __init__(self, image_size: int, channels: int, num_classes: int = 0):
        super().__init__()
        self.image_size, self.channels, self.num_classes = image_size, channels, num_classes
        self.hidden = _perceptron(channels * image_size * image_size)
        self.head = nn.Linear(HIDDEN[-1], 1)
        self.embed = nn.Embedding(num_classes, HIDDEN[-1]) if num_classes else None

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return projection_score(self.hidden(images.flatten(1)), self.head, self.embed, labels)


def mlp_pair(
    image_size: int, channels: int, latent_dim: int, num_classes: int, dropout: float, critic_norm: str, seed: int
) -> tuple[MLPGenerator, MLPDiscriminator]:
    """The ``mlp`` architecture's pair: G drawn from ``seed``, D from ``seed + 1`` (no dropout, no normalisation:
    Table 1 has neither, so ``dropout`` and ``critic_norm`` are not used)."""
    torch.manual_seed(seed)
    generator = MLPGenerator(image_size, channels, latent_dim, num_classes)
    torch.manual_seed(seed + 1)
    return generator, MLPDiscriminator(image_size, channels, num_classes)
