"""GAN losses, defined once and shared by every strategy.

Each loss is a small object with two methods taking raw discriminator scores (see
:mod:`suite.gan.models`): ``discriminator(real_scores, fake_scores)`` and ``generator(fake_scores)``.
Losses that need more than scores (the gradient penalty) say so with ``needs_penalty``.
Every generator loss is written with ``D(G(z)) = sigmoid(score)``: ``bce`` (paper 000's non-saturating
loss, also Lipizzaner's), ``wgan-gp`` (paper 002; Gulrajani et al.), ``minimax`` and ``heuristic``
(E-GAN's mutations, with the BCE discriminator loss), ``mse`` (least squares on the sigmoid, as
Lipizzaner), ``mustangs`` (one of the last three drawn per batch or per cell). docs/deviations.md says
why Mustangs' set has ``minimax`` and not ``bce``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn import functional as F

from ..config.registry import LOSSES as LOSS_ENTRIES


@dataclass(frozen=True)
class Loss:
    """A GAN loss on raw scores."""

    name: str
    needs_penalty: bool = False

    def discriminator(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class BCELoss(Loss):
    def discriminator(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        return 0.5 * (
            F.binary_cross_entropy_with_logits(real, torch.ones_like(real))
            + F.binary_cross_entropy_with_logits(fake, torch.zeros_like(fake))
        )

    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(fake, torch.ones_like(fake))


class MinimaxLoss(BCELoss):
    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        # 1/2 E[log(1 - D(G(z)))], with log(1 - sigmoid(s)) = logsigmoid(-s) for stability.
        return 0.5 * F.logsigmoid(-fake).mean()


class HeuristicLoss(BCELoss):
    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        # -1/2 E[log D(G(z))], with log D = logsigmoid(score) for stability.
        return -0.5 * F.logsigmoid(fake).mean()


class MSELoss(Loss):
    def discriminator(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        return 0.5 * (
            F.mse_loss(torch.sigmoid(real), torch.ones_like(real)) + F.mse_loss(torch.sigmoid(fake), torch.zeros_like(fake))
        )

    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(torch.sigmoid(fake), torch.ones_like(fake))


@dataclass(frozen=True)
class WassersteinLoss(Loss):
    needs_penalty: bool = True

    def discriminator(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        return fake.mean() - real.mean()

    def generator(self, fake: torch.Tensor) -> torch.Tensor:
        return -fake.mean()


LOSS_OBJECTS: dict[str, Loss] = {entry.name: entry.load()(entry.name) for entry in LOSS_ENTRIES if entry.target is not None}
"""Every registered loss of its own (not the random draws such as ``mustangs``), by name."""
MUSTANGS_CHOICES = LOSS_ENTRIES["mustangs"].draws


def get_loss(name: str) -> Loss:
    """The loss called ``name`` (``mustangs`` is resolved per batch by :func:`mustangs_draw`)."""
    if name not in LOSS_OBJECTS:
        drawn = ", ".join(e.name for e in LOSS_ENTRIES if e.draws)
        raise ValueError(f"unknown loss '{name}'; choose one of {', '.join(LOSS_OBJECTS)} or {drawn}")
    return LOSS_OBJECTS[name]


def mustangs_draw(rng: random.Random) -> Loss:
    """Draw one of Mustangs' three losses uniformly."""
    return LOSS_OBJECTS[rng.choice(MUSTANGS_CHOICES)]


def gradient_penalty(
    critic: Callable[..., torch.Tensor],
    real: torch.Tensor,
    fake: torch.Tensor,
    labels: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    eps: torch.Tensor | None = None,
) -> torch.Tensor:
    """WGAN-GP penalty ``E[(||grad_x critic(x_hat)||_2 - 1)^2]`` on random interpolates.

    ``x_hat = eps * real + (1 - eps) * fake`` with one ``eps ~ U[0, 1]`` per sample, drawn from
    ``generator`` unless given (data-parallel training passes this rank's slice of the draws
    for the whole global batch).
    """
    if eps is None:
        eps = torch.rand(real.shape[0], generator=generator)
    eps = eps.reshape(-1, 1, 1, 1).to(real.device, real.dtype, non_blocking=True)  # no host sync on a GPU
    interpolates = (eps * real + (1 - eps) * fake.detach()).requires_grad_(True)
    scores = critic(interpolates, labels) if labels is not None else critic(interpolates)
    (grads,) = torch.autograd.grad(scores.sum(), interpolates, create_graph=True)
    return ((grads.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
