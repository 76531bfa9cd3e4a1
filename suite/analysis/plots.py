"""The report's charts (matplotlib, headless): scaling curves and quality against training time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .findings import config_name, main_runs


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    # 20 distinct colours (the default cycle repeats after 10 lines), with changing markers
    colours = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]  # tab20 is a ListedColormap
    markers = ["o", "s", "^", "D", "v"] * 4
    plt.rcParams["axes.prop_cycle"] = cycler(color=colours) + cycler(marker=markers)
    return plt


def plot_scaling(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    """Time and efficiency against processes, one line per configuration."""
    if table.empty:
        return []
    plt = pyplot()
    written = []
    for column, ylabel, name in (
        ("train_s_mean", "training time (s)", f"{scaling}_time.png"),
        ("efficiency", "efficiency", f"{scaling}_efficiency.png"),
    ):
        data = table.dropna(subset=[column])
        if data.empty:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for config, part in data.groupby("config"):
            part = part.sort_values("procs")
            ax.plot(part["procs"], part[column].astype(float), label=config)
        if column == "efficiency":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("processes")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{scaling} scaling: {ylabel}")
        ax.set_xticks(sorted(data["procs"].unique()))
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def plot_quality_curves(records: list[dict], out: Path) -> list[str]:
    """Quality against training-window time: one line per configuration at its largest P.

    Only curves scored with the same feature network and sample count share the figure (the
    target's, else the most common); the target, if any, is a horizontal line.
    """
    curves = [r for r in records if r.get("status") == "ok" and r.get("curve")]
    if not curves:
        return []
    target = next((r["time_to_target"] for r in curves if r.get("time_to_target")), None)
    kinds = [(p["features"], p["n"]) for r in curves for p in r["curve"]]
    kind = (target["features"], target["n"]) if target and target["n"] else max(set(kinds), key=kinds.count)
    field = "kid_mean" if target and target["metric"] == "kid" else "fid"
    by_config: dict[str, list[dict]] = {}
    for r in curves:
        by_config.setdefault(config_name(r), []).append(r)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, runs in sorted(by_config.items()):
        main, top = main_runs(runs)
        first_repeats = sorted(
            (r for r in main if r.get("repeat", 0) == min(x.get("repeat", 0) for x in main)), key=lambda r: str(r.get("seed"))
        )
        seeds = ",".join(str(r.get("seed")) for r in first_repeats)
        color = None
        for r in first_repeats:  # one line per seed, one colour per strategy
            points = [p for p in r["curve"] if (p["features"], p["n"]) == kind and p.get(field) is not None]
            if points:
                label = f"{name}, P={top}, seed{'s' if len(first_repeats) > 1 else ''} {seeds}" if color is None else None
                (line,) = ax.plot([p["clock_s"] for p in points], [p[field] for p in points], label=label, color=color, lw=1.2)
                color = line.get_color()
    if target:
        ax.axhline(target["target"], color="grey", lw=1, ls="--", label=f"target {target['metric'].upper()} {target['target']:g}")
    label = "KID" if field == "kid_mean" else "FID"
    ax.set_xlabel("training-window time (s)")
    ax.set_ylabel(f"{label} ({kind[0]}, n={kind[1]})")
    ax.set_yscale("log")
    ax.set_title(f"{label} against training time, each strategy at its largest P")
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"quality_vs_time_{file_slug(kind[0])}.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return [name]


def file_slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
