"""One look per system in every figure: a strategy's colour, a loss's marker and line, an engine's shade.

The look is a function of the system alone, taken from the registries' order (:data:`suite.config.registry.STRATEGIES`,
``LOSSES``, ``ENGINES``), never from the order in which a figure happens to draw its lines, so the same system looks
the same in every chart of every report. Colours are Okabe-Ito (distinguishable with the common colour vision
deficiencies; its yellow left out, too pale on white), moved :data:`LOSS_STEP` slots per loss so that two losses of
one strategy differ in colour as well as marker. The looks as users read them: docs/reports.md (Figures).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from matplotlib.colors import to_hex, to_rgb

from ..config.registry import ENGINES, LOSSES, STRATEGIES

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's colour-blind-safe palette (blue, orange, green, vermillion, purple, sky, yellow, black)."""
COLOURS = tuple(c for c in OKABE_ITO if c != "#F0E442")
"""The colours systems are drawn in: Okabe-Ito's but its yellow."""
LOSS_STEP = 2
"""Slots of :data:`COLOURS` a system's colour moves per loss (registry order) from its strategy's: with the suite's five
systems blue, orange, green, purple and black; never the vermillion an engine's shade would turn brown beside orange."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 2)))
SHADES = (0.0, -0.45, -0.25, -0.6)
"""Per engine: 0 keeps the colour, below 0 mixes it with black (never with white: pale colours are hard to tell apart)."""
FILLS = ("full", "none", "left", "bottom")
OTHER = "#7f7f7f"
"""The colour of a name no registry knows (records of another suite)."""


@dataclass(frozen=True)
class Style:
    """How one system is drawn: ``plot_kwargs`` gives matplotlib's keyword arguments."""

    color: str
    marker: str
    linestyle: Any
    fillstyle: str = "full"

    def plot_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Axes.plot`` and ``Axes.errorbar``."""
        return {
            "color": self.color,
            "marker": self.marker,
            "linestyle": self.linestyle,
            "fillstyle": self.fillstyle,
            "markerfacecolor": "white" if self.fillstyle == "none" else self.color,
        }


def _position(names: tuple[str, ...], name: str) -> int | None:
    return names.index(name) if name in names else None


def _shade(color: str, amount: float) -> str:
    """``color`` mixed with black by ``amount`` (:data:`SHADES`: never with white)."""
    r, g, b = to_rgb(color)
    return to_hex((r - r * abs(amount), g - g * abs(amount), b - b * abs(amount)))


def style(strategy: str, loss: str, engine: str, variant: str = "") -> Style:
    """The look of the system ``strategy / loss / engine`` (``variant``: its label, sweep or grid text, if any)."""
    s = _position(STRATEGIES.names(), strategy)
    i = _position(LOSSES.names(), loss)
    e = _position(ENGINES.names(), engine)
    color = COLOURS[(s + LOSS_STEP * (i or 0)) % len(COLOURS)] if s is not None else OTHER
    if e is not None:
        color = _shade(color, SHADES[e % len(SHADES)])
    fill = FILLS[int(hashlib.sha256(variant.encode()).hexdigest(), 16) % len(FILLS)] if variant else "full"
    return Style(
        color,
        MARKERS[((s or 0) + LOSS_STEP * i) % len(MARKERS)] if i is not None else "o",
        LINESTYLES[i % len(LINESTYLES)] if i is not None else "-",
        fill,
    )


def style_of(label: str) -> Style:
    """The look of the system a report label names: ``strategy / loss / engine`` and whatever follows (configuration
    labels of the tables, the headline and the projection alike)."""
    parts = label.split(" / ", 2)
    if len(parts) < 3:
        return style(parts[0], "", "")
    return style(parts[0], parts[1], parts[2].split(" ", 1)[0])
