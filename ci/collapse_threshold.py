"""Where "collapsed" starts: coverage of samples collapsed by construction against healthy ones, on the main job's ruler.

Every set is scored by the suite's own scoring function (``evaluate_images``) as the main job scores a model: the
pinned digits ruler (classifier features, 128-d), 500 samples against the 500-image real reference draw, k = 5:

* healthy: real digits the reference draw does not hold (a generator as good as the data), as they are and varied
  (shifted by up to a pixel, pixel noise of std 0.05);
* one class: real digits of a single class, varied (a generator that learned one mode of ten: partial, not total,
  collapse);
* collapsed: one image for every sample, plus pixel noise of standard deviation 0.012 (the pixel spread of the main
  job's collapsed cellular seed 2 of an earlier run), for a real digit, the mean digit, and a blank image;
* untrained: the suite's untrained DC-GAN generator (what a run that learned nothing draws).

Writes ``reports/collapse/threshold.md`` and ``.csv``. ``python ci/collapse_threshold.py`` (a minute on a CPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.analysis.markdown import markdown_table
from suite.gan.data import CHANNELS, load_dataset
from suite.gan.models import build_pair
from suite.measure.metrics.evaluate import evaluate_images, reference_rows
from suite.measure.metrics.reference import Reference

N, SIZE, K = 500, 20, 5
DIGITS = 20
"""Real digits each repeated as a collapse (one row each in the CSV, their spread in the table)."""
NOISE = 0.012
OUT = Path(__file__).resolve().parent.parent / "reports" / "collapse"


def _noisy(image: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
    """``N`` copies of ``image`` with pixel noise of std :data:`NOISE`, clamped to [-1, 1]."""
    return (image.expand(N, *image.shape[1:]) + NOISE * torch.randn(N, *image.shape[1:], generator=rng)).clamp(-1, 1)


def _held_out() -> tuple[torch.Tensor, torch.Tensor]:
    """Every real digit the reference draw does not hold: the test split and the train rows outside the draw."""
    train, test = load_dataset("digits", SIZE, "train"), load_dataset("digits", SIZE, "test")
    outside = np.setdiff1d(np.arange(len(train)), reference_rows(len(train), N))
    parts = [train.fetch(outside), test.fetch(np.arange(len(test)))]
    return torch.cat([p[0] for p in parts]), torch.cat([torch.as_tensor(p[1]) for p in parts])


def _variations(images: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
    """``N`` draws of ``images``, each shifted by up to a pixel each way and with pixel noise of std 0.05: a
    generator of these digits, not a copy machine (copies would give k-NN radii of 0)."""
    picked = images[torch.randint(len(images), (N,), generator=rng)]
    shifts = torch.randint(-1, 2, (N, 2), generator=rng)
    moved = torch.stack([torch.roll(x, (int(dy), int(dx)), dims=(-2, -1)) for x, (dy, dx) in zip(picked, shifts)])
    return (moved + 0.05 * torch.randn(moved.shape, generator=rng)).clamp(-1, 1)


def sets() -> dict[str, tuple[str, torch.Tensor]]:
    """Each case's kind and its ``N`` images."""
    images, labels = _held_out()
    rng = torch.Generator().manual_seed(0)
    cases: dict[str, tuple[str, torch.Tensor]] = {
        "held-out real digits": ("healthy", images[torch.randperm(len(images), generator=rng)[:N]]),
        "held-out real digits, varied": ("healthy", _variations(images, rng)),
    }
    for c in (0, 1, 7):
        cases[f"digits of class {c} only, varied"] = ("one class", _variations(images[labels == c], rng))
    for i in range(DIGITS):  # where one image lands decides how many real balls it is in: many of them
        cases[f"real digit {i} + noise"] = ("collapsed, one digit", _noisy(images[i * 37 : i * 37 + 1], rng))
    cases["the mean digit + noise"] = ("collapsed", _noisy(images.mean(0, keepdim=True), rng))
    cases["a blank image + noise"] = ("collapsed", _noisy(-torch.ones_like(images[:1]), rng))
    generator, _ = build_pair(SIZE, CHANNELS["digits"], 100, seed=0)
    with torch.no_grad():
        cases["untrained DC-GAN generator"] = ("untrained", generator.eval()(torch.randn(N, 100, generator=rng)))
    return cases


def _conclusion(table: pd.DataFrame) -> str:
    """The threshold of :mod:`suite.analysis.collapse` at these settings, against the cases' coverage."""
    from suite.analysis.collapse import COLLAPSED_BALLS, COLLAPSED_COVERAGE

    limit = max(COLLAPSED_COVERAGE, COLLAPSED_BALLS * K / N)
    alike = table[table["kind"].isin(("collapsed", "collapsed, one digit", "untrained"))]["coverage"].max()
    partial = table[table["kind"] == "one class"]["coverage"].min()
    healthy = table[table["kind"] == "healthy"]["coverage"].min()
    return (
        f"The threshold (`suite/analysis/collapse.py`): coverage at or below {COLLAPSED_BALLS} k / n_real = "
        f"{COLLAPSED_BALLS * K / N:.3f}, and at least {COLLAPSED_COVERAGE}: here {limit:.3f}. Samples all alike and the "
        f"untrained generator cover at most {alike:.3f} (one image lies in about k of the {N} real balls, k / n_real = "
        f"{K / N:.3f}, and in up to about 3 k where it lands among many); a generator of one class of ten covers at least {partial:.3f}, a healthy one {healthy:.3f}. "
        "The threshold separates all alike from one class with a margin of "
        f"{limit / max(alike, 1e-9):.1f}x below it and {partial / limit:.1f}x above it.\n"
    )


def main() -> int:
    ref = Reference(dataset="digits", image_size=SIZE, features="classifier", n=N, prdc_k=K)
    networks = ref.networks()
    rows = []
    for name, (kind, images) in sets().items():
        q = evaluate_images(images, np.full(len(images), -1), ref, networks)
        rows.append(
            {
                "case": name,
                "kind": kind,
                "coverage": q.get("coverage"),
                "recall": q.get("recall"),
                "precision": q.get("precision"),
                "density": q.get("density"),
                "fid": q.get("fid"),
                "pixel_std": q.get("pixel_std"),
                "not_scorable": q.get("not_scorable"),
            }
        )
    table = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "threshold.csv", index=False)
    one = table[table["kind"] == "collapsed, one digit"]
    spread = {
        "case": f"one real digit + noise, {DIGITS} digits: largest",
        "kind": "collapsed",
        **one.drop(columns=["case", "kind", "not_scorable"]).max().to_dict(),
    }
    shown = pd.concat([table[table["kind"] != "collapsed, one digit"], pd.DataFrame([spread])]).drop(columns=["not_scorable"])
    shown = shown.round(4)
    balls = sorted(int(round(c * N)) for c in one["coverage"])
    lines = [
        "# Where a collapse starts: coverage of collapsed and healthy samples\n",
        f"Generated by `ci/collapse_threshold.py`: {N} samples of each case scored by the suite's scoring function "
        f"(`evaluate_images`) on the pinned digits ruler (classifier features) against the {N}-image real reference "
        f"draw, k = {K} (the main job's settings). Collapsed cases are one image for every sample plus pixel noise of "
        f"std {NOISE} (an earlier main job's collapsed cellular seed 2 had a pixel std of 0.012; the committed job's collapsed seed 1 has 0.004).\n",
        markdown_table(shown),
        "",
        f"One real digit repeated ({DIGITS} digits, `threshold.csv` has each): real balls covered {balls} of {N} "
        f"(k = {K}); the table's row is the largest of each score.\n",
        _conclusion(table),
    ]
    (OUT / "threshold.md").write_text("\n".join(lines) + "\n")
    print(shown.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
