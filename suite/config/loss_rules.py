"""The rules of the losses' own settings sections that their types cannot say: WGAN-GP's ``wgan_gp`` (the
scenario's, or one entry's with its own fields on top), reached through its registry entry's ``check_settings`` trait
(:mod:`suite.config.registry`); each broken rule is reported through ``fail`` naming the field.
"""

from __future__ import annotations

from typing import Any, Callable

from .shown import shown


def check_betas(betas: list[float], path: str, fail: Callable[[str, str], Any]) -> None:
    """Adam's betas: two numbers in [0, 1)."""
    if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
        fail(path, f"expected two numbers in [0, 1), got {shown(betas)}")


def check_wgan_gp(wgan_gp: Any, path: str, fail: Callable[[str, str], Any]) -> None:
    """The ``check_settings`` trait of the ``wgan-gp`` loss: its critic steps, learning rate and betas."""
    if wgan_gp.n_critic < 1:
        fail(f"{path}.n_critic", f"must be at least 1, got {shown(wgan_gp.n_critic)}")
    if wgan_gp.lr <= 0:
        fail(f"{path}.lr", "must be positive")
    check_betas(wgan_gp.betas, f"{path}.betas", fail)
