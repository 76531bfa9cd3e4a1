"""The ``wgan-gp`` loss's own scenario section, ``wgan_gp``, and its rules beyond their types (torch-free: the suite
reads them to validate scenarios), named by the loss's registry entry (``settings_class``, ``check_settings``); a
scenario file writes the section at its top level and a run entry its own fields under the same name, as every
strategy's, loss's and plugin's section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Callable

from pydantic import Field

from ..config.loss_rules import check_betas
from ..config.schema import AtMost
from ..config.sections import Beta, LearningRate

_NEVER = "a run this long would never finish"


@dataclass(frozen=True)
class WganGpConfig:
    """Settings used when ``loss: wgan-gp`` (Gulrajani et al. defaults)."""

    n_critic: Annotated[int, Field(ge=1), AtMost(1000, _NEVER)] = 5
    """Critic steps per generator step."""
    gp_weight: Annotated[float, Field(ge=0), AtMost(1e6, "a penalty this large swamps the critic's loss")] = 10.0
    """Gradient-penalty coefficient lambda."""
    lr: LearningRate = 0.0001
    """Adam learning rate for critic and generator."""
    betas: list[Beta] = field(default_factory=lambda: [0.0, 0.9])
    """Adam betas for critic and generator."""


def check_wgan_gp(wgan_gp: WganGpConfig, path: str, fail: Callable[[str, str], Any]) -> None:
    """The ``check_settings`` trait of the ``wgan-gp`` loss: its betas (the other ranges are its fields' bounds)."""
    check_betas(wgan_gp.betas, f"{path}.betas", fail)
