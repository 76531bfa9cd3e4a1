"""What every chart of the suite shares: matplotlib headless with its cache in one place, a figure saved once, the
legend outside, axes whose ticks a reader can read (powers, 1-2-5, counts, process counts), and intervals clipped where
one would flatten the rest (the report's charts, :mod:`.plots`; the runs' charts, :mod:`.run_plots`; the
projection's)."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .stats.summary import Summary

log = logging.getLogger(__name__)

DPI = 110


BAND_ALPHA = 0.18


MPL_CACHE = "gan-scaling-suite/matplotlib"
"""matplotlib's configuration and font cache, under ``$XDG_CACHE_HOME`` (default ``~/.cache``), unless ``MPLCONFIGDIR``
says otherwise (docs/reports.md): never a fresh ``/tmp/matplotlib-*`` folder per run, and no line about it on stderr."""


def matplotlib_cache() -> None:
    """Point ``MPLCONFIGDIR`` at :data:`MPL_CACHE` where the user has not set it and the folder can be made."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / MPL_CACHE
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # matplotlib makes its own temporary folder and says so, as it would have
    if os.access(folder, os.W_OK):
        os.environ["MPLCONFIGDIR"] = str(folder)


def pyplot() -> Any:
    """matplotlib's pyplot on the headless Agg backend (its cache: :func:`matplotlib_cache`; the one-time "building the
    font cache" notice is kept off stderr)."""
    matplotlib_cache()
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, out: Path, name: str) -> list[str]:
    """Write ``fig`` as ``out/name`` (legends outside the axes included; atomically, never through a link:
    :func:`suite.records.results.atomic_write`) and close it; return ``[name]``."""
    from ..records.results import atomic_write

    with atomic_write(out / name) as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return [name]


def legend_outside(ax: Any) -> None:
    """The legend right of the axes, clear of the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False, borderaxespad=0.0)


MAX_TICKS = 8
"""Labelled ticks an axis carries at most (more crowd each other)."""


def tick_text(value: float) -> str:
    """A tick's number as a reader writes it: decimals with up to 6 significant digits (``0.0125``, ``72``, ``1.25``,
    ``4096``), powers of ten only far from 1 (``1e-05``, ``2e+07``)."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e6:
        return str(np.format_float_positional(value, precision=6, fractional=False, trim="-"))
    return f"{value:.3g}"


def count_text(value: float) -> str:
    """A count on a linear axis (training images): ``3,840``, ``12k``, ``1.5M``."""
    size = abs(value)
    if size < 10_000:
        return f"{value:,.0f}"
    if size < 1_000_000:
        return f"{value / 1e3:.4g}k"
    return f"{value / 1e6:.4g}M" if size < 1e9 else f"{value:.1e}"


def _inside(ticks: Any, lo: float, hi: float) -> list[float]:
    span = (hi - lo) * 1e-9
    return [float(f"{t:.12g}") for t in ticks if lo - span <= t <= hi + span]  # 0.7, not 0.7000000000000001


def _powers(lo: float, hi: float, base: float, every: int = 1) -> list[float]:
    """The integer powers of ``base`` in ``[lo, hi]``, every ``every``-th (always the one nearest 1 included)."""
    first, last = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    return [float(base**k) for k in range(first, last + 1) if k % every == 0]


def _one_two_five(lo: float, hi: float) -> list[float]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return _inside(sorted(m * 10.0**k for k in range(first, last + 1) for m in (1, 2, 5)), lo, hi)


def _linear(lo: float, hi: float, bins: int = 5) -> list[float]:
    from matplotlib.ticker import MaxNLocator

    return _inside(MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi), lo, hi)


def log_ticks(lo: float, hi: float, base: float = 10) -> list[float]:
    """Between 3 and :data:`MAX_TICKS` round numbers in ``[lo, hi]`` (positive) for a log axis: powers of ``base`` where
    they are enough, else 1-2-5 steps (base 10), else evenly spaced round numbers (a narrow interval: ``1, 1.5, 2``);
    over many decades, every second (third, ...) power. Base 2 counts in powers of ten far from 1."""
    lo, hi = sorted((lo, hi))
    if not (lo > 0 and math.isfinite(hi)) or hi <= lo:
        return []
    if base == 2 and (lo < 1 / 64 or hi > 8192):
        base = 10  # powers of two far from 1 are no round numbers to a reader (0.0009765625)
    # evenly spaced round numbers read well within a decade
    narrow = [[t for t in _linear(lo, hi, bins) if t > 0] for bins in (5, 9)] if hi < 10 * lo else []
    candidates = [_powers(lo, hi, base)] + ([_one_two_five(lo, hi)] if base == 10 else []) + narrow
    for low in (4, 3):
        for ticks in candidates:
            if low <= len(ticks) <= MAX_TICKS:
                return ticks
    every = 2
    while len(ticks := _powers(lo, hi, base, every)) > MAX_TICKS:
        every += 1
    return ticks if len(ticks) >= 3 else max(candidates, key=lambda t: len(t) if len(t) <= MAX_TICKS + 2 else 0)


def symlog_ticks(lo: float, hi: float, linthresh: float) -> list[float]:
    """Ticks for a symmetric-log axis: round numbers inside the linear band ``[-linthresh, linthresh]`` and 1-2-5 steps
    beyond it on either side (powers of ten alone, then fewer in the band, where those are too many; no more than
    :data:`MAX_TICKS`)."""
    lo, hi = sorted((lo, hi))
    inner = (max(lo, -linthresh), min(hi, linthresh))

    def beyond(steps: Callable[[float, float], list[float]]) -> list[float]:
        above = [t for t in steps(linthresh, hi) if t > linthresh] if hi > linthresh else []
        below = [-t for t in steps(linthresh, -lo) if t > linthresh] if lo < -linthresh else []
        return below + above

    options = [
        sorted(set(_linear(*inner, bins)) | set(beyond(outer)))
        for bins in (5, 2)
        for outer in (_one_two_five, lambda a, b: _powers(a, b, 10))
    ]
    fitting = [ticks for ticks in options if len(ticks) <= MAX_TICKS]
    if fitting:
        return fitting[0]
    ticks = options[-1]
    while len(ticks) > MAX_TICKS:
        ticks = [t for i, t in enumerate(ticks) if i % 2 == 0 or t == 0.0]
    return ticks


def readable_ticks(ax: Any, which: str = "y") -> None:
    """Labelled round numbers on a log or symlog axis of ``ax`` (``which``: ``x`` or ``y``), chosen when the figure is
    drawn from the axis' final interval: at least three where the interval allows, plain decimals (:func:`tick_text`),
    unlabelled minor ticks."""
    from matplotlib.ticker import FuncFormatter, Locator, NullFormatter, NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis

    class Readable(Locator):
        def __call__(self) -> list[float]:
            return self.tick_values(*axis.get_view_interval())

        def tick_values(self, vmin: float, vmax: float) -> list[float]:
            transform = axis.get_transform()
            if hasattr(transform, "linthresh"):
                return symlog_ticks(vmin, vmax, float(transform.linthresh))
            return log_ticks(vmin, vmax, float(getattr(transform, "base", 10)))

    axis.set_major_locator(Readable())
    axis.set_major_formatter(FuncFormatter(lambda value, _: tick_text(value)))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def count_axis(ax: Any, which: str = "x") -> None:
    """A linear axis of counts (training images): at most :data:`MAX_TICKS` whole round numbers, short labels."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda value, _: count_text(value)))


def procs_axis(ax: Any, procs: list[int]) -> None:
    """The x axis of process counts: a tick at each measured P, labelled; log base 2 from three counts on (two are
    as well read on a linear axis, where they are its only ticks)."""
    from matplotlib.ticker import NullLocator

    if len(procs) >= 3:
        ax.set_xscale("log", base=2)
    ax.set_xticks(procs, labels=[str(p) for p in procs])
    ax.xaxis.set_minor_locator(NullLocator())


CLIP_FACTOR = 4.0
"""An interval end beyond the drawn values by more than this factor (log axis) is cut at the axis' edge."""


def band_words(fig: Any, drawn: str = "95 % band") -> str:
    """``drawn`` where a figure's axes hold a band (two seeds or more), else what was drawn instead: a title promises
    no band that one seed cannot give."""
    from matplotlib.collections import PolyCollection

    banded = any(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)
    return drawn if banded else "one seed per system: no band"


EFFICIENCY_SPAN = 0.25
"""The least span of an efficiency axis around the ideal 1: a 0.04 % loss must not look like a cliff."""


def clip_intervals(ax: Any, values: list[float], intervals: list[tuple[float, float] | None], log_scale: bool) -> bool:
    """Limit the y axis to ``values`` (centres and ideals) and their intervals, an interval end at most
    :data:`CLIP_FACTOR` beyond the values (log scale; linear: as far again as the values' largest), so that a wide
    interval of few runs does not squash every other point; say on the figure where ends are cut. True if any was."""
    every_end = [end for i in intervals if i for end in i if math.isfinite(end)]
    kept = [v for v in values if math.isfinite(v) and (v > 0 or not log_scale)]
    if not kept:
        return False
    if log_scale:
        ends = [e for e in every_end if e > 0]
        floor, ceiling = min(kept) / CLIP_FACTOR, max(kept) * CLIP_FACTOR
    else:
        ends = every_end
        floor, ceiling = min(min(kept), 0.0), 2 * max(max(kept), 0.0) or 1.0
    low, high = max(min(ends + kept), floor), min(max(ends + kept), ceiling)
    cut = any(e < low or e > high for e in every_end)
    if log_scale:
        pad = (high / low) ** 0.05
        ax.set_ylim(low / pad, high * pad)
    else:
        pad = (high - low) * 0.05 or 0.05
        ax.set_ylim(low - pad, high + pad)
    if cut:
        ax.text(
            0.01,
            0.01,
            "interval ends beyond the axis are cut (the table gives them)",
            transform=ax.transAxes,
            fontsize=7,
            color="dimgray",
            va="bottom",
        )
    return cut


def skipped(name: str, reason: str) -> list[str]:
    """No figure: one line saying why."""
    log.info("%s not drawn: %s", name, reason)
    return []


def is_summary(value: Any) -> bool:
    return isinstance(value, Summary)


def error_bars(centers: list[float], intervals: list[tuple[float, float] | None]) -> np.ndarray:
    """Asymmetric error bars (2, N) from intervals; 0 where a point has none."""
    lo = [c - i[0] if i else 0.0 for c, i in zip(centers, intervals)]
    hi = [i[1] - c if i else 0.0 for c, i in zip(centers, intervals)]
    return np.array([lo, hi])
