"""The rule of Adam's betas that their types cannot say, for the ``train`` section and every loss's own section that
sets an optimiser's betas (the ``wgan-gp`` loss's, :mod:`suite.gan.wgan_gp_settings`); a broken rule is reported
through ``fail`` naming the field.
"""

from __future__ import annotations

from typing import Any, Callable

from .shown import shown


def check_betas(betas: list[float], path: str, fail: Callable[[str, str], Any]) -> None:
    """Adam's betas: two numbers in [0, 1)."""
    if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
        fail(path, f"expected two numbers in [0, 1), got {shown(betas)}")
