"""The one generator and discriminator of the suite (paper 000, section 3.2, Tables 1-4).

Every strategy builds its networks here, so a comparison between strategies is a comparison
between training methods, never between architectures. The discriminator's head is sized from the
image size (the tables print 2048 -> 1, the size for 64x64), so the same code serves 28, 32 and 64
pixels. The choices the tables leave open (raw scores, conditioning by projection) and the
``critic_norm`` option (:data:`CRITIC_NORMS`, for the gradient penalty) are explained in
docs/strategies.md and docs/deviations.md.
"""

from __future__ import annotations

import math
from typing import TypeVar

import torch
from torch import nn
from torch.nn import functional as F

from ..config.plan import check_image_size
from ..config.registry import ARCHITECTURES

M = TypeVar("M", bound=nn.Module)

FEATURE_CHANNELS = (16, 32, 64, 128)
"""Output channels of the four stride-2 convolutions of the discriminator."""

CRITIC_NORMS = ("batch", "layer", "none")
"""Normalisation after the last three discriminator convolutions (docs/strategies.md says why ``layer``)."""


class Generator(nn.Module):
    """DC-GAN generator of Table 1, or the DC-CGAN generator of Table 3 when ``num_classes > 0``.

    Parameters
    ----------
    image_size:
        Height and width of the generated images (a multiple of 4).
    channels:
        1 for grayscale, 3 for colour.
    latent_dim:
        Size of the noise vector ``z`` (100 in the paper).
    num_classes:
        0 for the unconditional generator; otherwise the one-hot label of this many classes is
        concatenated to ``z`` (100 + 10 = 110 inputs in Table 3).
    """

    def __init__(self, image_size: int = 32, channels: int = 1, latent_dim: int = 100, num_classes: int = 0):
        super().__init__()
        check_image_size(image_size)
        self.image_size, self.channels = image_size, channels
        self.latent_dim, self.num_classes = latent_dim, num_classes
        self.init_size = image_size // 4
        self.input = nn.Sequential(nn.Linear(latent_dim + num_classes, 128 * self.init_size**2), nn.ReLU())
        self.blocks = nn.Sequential(
            nn.BatchNorm2d(128, eps=1e-5, momentum=0.1),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(128, 128, 3, stride=1, padding=1),
            nn.BatchNorm2d(128, eps=0.8, momentum=0.1),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(128, 64, 3, stride=1, padding=1),
            nn.BatchNorm2d(64, eps=0.8, momentum=0.1),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(64, channels, 3, stride=1, padding=1),
            nn.Tanh(),
        )

    @property
    def conditional(self) -> bool:
        return self.num_classes > 0

    def forward(self, z: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.conditional:
            if labels is None:
                raise ValueError("a conditional generator needs the labels to generate")
            z = torch.cat([z, F.one_hot(labels, self.num_classes).to(z.dtype)], dim=1)
        h = self.input(z).view(z.shape[0], 128, self.init_size, self.init_size)
        return self.blocks(h)


def _discriminator_block(in_channels: int, out_channels: int, dropout: float, norm: str) -> list[nn.Module]:
    layers: list[nn.Module] = [
        nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Dropout(dropout),
    ]
    if norm == "batch":
        layers.append(nn.BatchNorm2d(out_channels, eps=0.8, momentum=0.1))
    elif norm == "layer":
        layers.append(nn.GroupNorm(1, out_channels))
    return layers


class Discriminator(nn.Module):
    """DC-GAN discriminator of Table 2, or the DC-CGAN discriminator of Table 4 when conditional.

    Returns one raw score per image (docs/strategies.md says why the sigmoid lives in the
    loss). Used as a Wasserstein critic, the same network's raw score is the critic value.

    Parameters
    ----------
    image_size, channels:
        Input image geometry.
    num_classes:
        0 for unconditional; otherwise the label is projected onto the features.
    dropout:
        Dropout probability after each convolution (0.25 in the tables).
    norm:
        Normalisation after the last three convolutions, one of :data:`CRITIC_NORMS`: ``batch``
        (the tables), ``layer`` or ``none`` (per-sample critics for the gradient penalty).
    """

    def __init__(self, image_size: int = 32, channels: int = 1, num_classes: int = 0, dropout: float = 0.25, norm: str = "batch"):
        super().__init__()
        check_image_size(image_size)
        if norm not in CRITIC_NORMS:
            raise ValueError(f"discriminator norm {norm!r} is not one of {', '.join(CRITIC_NORMS)}")
        self.image_size, self.channels, self.num_classes, self.norm = image_size, channels, num_classes, norm
        layers: list[nn.Module] = []
        in_channels = channels
        for i, out_channels in enumerate(FEATURE_CHANNELS):
            layers += _discriminator_block(in_channels, out_channels, dropout, norm if i > 0 else "none")
            in_channels = out_channels
        self.features = nn.Sequential(*layers)
        side = image_size
        for _ in FEATURE_CHANNELS:  # 3x3 convolution, stride 2, padding 1: ceil(side / 2)
            side = math.ceil(side / 2)
        self.feature_dim = FEATURE_CHANNELS[-1] * side * side
        self.head = nn.Linear(self.feature_dim, 1)
        self.embed = nn.Embedding(num_classes, self.feature_dim) if num_classes else None

    @property
    def conditional(self) -> bool:
        return self.num_classes > 0

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return projection_score(self.features(images).flatten(1), self.head, self.embed, labels)


def projection_score(h: torch.Tensor, head: nn.Module, embed: nn.Embedding | None, labels: torch.Tensor | None) -> torch.Tensor:
    """A discriminator's raw score from its last features ``h``: the linear head, plus, for a conditional one, the
    projection of the label's embedding on ``h`` (Miyato & Koyama)."""
    score = head(h).squeeze(1)
    if embed is not None:
        if labels is None:
            raise ValueError("a conditional discriminator needs the labels of the images")
        score = score + (embed(labels) * h).sum(dim=1)
    return score


def init_weights(module: M, seed: int) -> M:
    """DC-GAN initialisation (Radford et al., paper 000 reference [2]) drawn from ``seed`` alone.

    All weights ~ N(0, 0.02), BatchNorm (and the critic's GroupNorm) scales ~ N(1, 0.02), biases 0. Drawing from a private
    generator makes a network depend on its seed only, not on what else the process built
    before it, which is what makes results independent of how work is placed on ranks.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, (nn.BatchNorm2d, nn.GroupNorm)):
                layer.weight.copy_(torch.normal(1.0, 0.02, layer.weight.shape, generator=generator))
                layer.bias.zero_()
            elif isinstance(layer, (nn.Conv2d, nn.Linear, nn.Embedding)):
                layer.weight.copy_(torch.normal(0.0, 0.02, layer.weight.shape, generator=generator))
                bias = getattr(layer, "bias", None)
                if bias is not None:
                    bias.zero_()
    return module


def dcgan_pair(
    image_size: int, channels: int, latent_dim: int, num_classes: int, dropout: float, critic_norm: str, seed: int
) -> tuple[Generator, Discriminator]:
    """The ``dcgan`` architecture's pair (Tables 1-4), initialised by :func:`init_weights`: G from ``seed``, D from ``seed + 1``."""
    generator = init_weights(Generator(image_size, channels, latent_dim, num_classes), seed)
    discriminator = init_weights(Discriminator(image_size, channels, num_classes, dropout, critic_norm), seed + 1)
    return generator, discriminator


def build_pair(
    image_size: int,
    channels: int,
    latent_dim: int,
    num_classes: int = 0,
    dropout: float = 0.25,
    seed: int = 0,
    critic_norm: str = "batch",
    architecture: str = "dcgan",
) -> tuple[nn.Module, nn.Module]:
    """Build a generator and a discriminator (conditional on ``num_classes`` labels if > 0).

    ``architecture`` names the pair (:data:`suite.config.registry.ARCHITECTURES`: ``dcgan``, this module's
    networks, or ``mlp``, :mod:`suite.gan.mlp`). ``critic_norm`` is the discriminator's normalisation
    (:data:`CRITIC_NORMS`; the tables' ``batch`` unless given; an architecture without normalisation ignores it).

    Both are initialised from ``seed`` (generator from ``seed``, discriminator from ``seed + 1``).
    Building them leaves the global random state untouched: PyTorch's default initialisation,
    which runs before ours, would otherwise shift later dropout masks depending on when and
    how many networks a process happens to build.
    """
    builder = ARCHITECTURES[architecture].load()
    with torch.random.fork_rng(devices=[]):
        return builder(image_size, channels, latent_dim, num_classes, dropout, critic_norm, seed)
