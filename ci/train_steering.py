"""Make the shipped digits steering network and measure how far it agrees with the ruler.

    .venv/bin/python ci/train_steering.py [--out suite/measure/metrics/rulers] [--report reports/steering] [--twin FILE]

Trains ``steering:digits`` (a perceptron on the raw 8x8 pixels, ``pixel-mlp``, on the even rows of the digits'
test split, which the ruler ``classifier:digits`` never saw; :mod:`suite.measure.metrics.steering`), pins it in
the ruler folder ``--out`` (the package's by default) and writes ``--report``/steering.md and fids.csv: its
top-1 agreement with the ruler on the test split's odd rows, and the rank correlation of the FIDs the two give a
fixed set of degraded and mode-dropped image sets. ``--twin FILE``: also measure an older steering network of the
ruler's own architecture (the CNN trained on the odd half of the training split), for the comparison.
Seconds to a minute on a CPU.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suite.measure.metrics.classifier import SMALL_CNN, ClassifierNet  # noqa: E402
from suite.measure.metrics.rulers import PACKAGED_RULERS, STEERING, Ruler, read_manifest, sha256_file  # noqa: E402
from suite.measure.metrics.steering import (  # noqa: E402
    Agreement,
    SteeringSpec,
    make_steering_network,
    measure_agreement,
    spearman,
)

IMAGE_SIZE = 20
"""The digits scenarios' image size: generated images reach both networks at it."""
TWIN_SOURCE = "`git show 9a86c2c:suite/measure/metrics/rulers/steering-digits.pt`"
"""Where the twin it replaced can be had: the steering network shipped before this one."""


def _twin(path: Path, ruler: ClassifierNet) -> Agreement:
    """The agreement of the old twin (the ruler's CNN on the odd half of the training split, seed 1)."""
    entry = Ruler(
        name="steering:digits",
        file=path.name,
        sha256=sha256_file(path),
        dataset="digits",
        image_size=IMAGE_SIZE,
        channels=1,
        num_classes=10,
        train_split="train",
        train_images=718,
        heldout_split="test",
        heldout_images=360,
        heldout_accuracy=0.0,
        epochs=24,
        seed=1,
        made_with="",
        role=STEERING,
        train_rows="odd",
        architecture=SMALL_CNN,
    )
    twin = ClassifierNet("digits", role=STEERING, pinned=(entry, path))
    return measure_agreement(ruler, twin, "digits", IMAGE_SIZE)


def _mixtures(agreement: Agreement) -> float:
    """The rank correlation (logits) over the class-mixture sets only: what cellular's mixture weights change."""
    kept = [f for f in agreement.fids if "class" in f[0] and "noise" not in f[0]]
    return spearman([f[1] for f in kept], [f[2] for f in kept])


def _row(label: str, a: Agreement) -> str:
    return (
        f"| {label} | {a.top1:.4f} | {a.ruler_accuracy:.4f} | {a.steering_accuracy:.4f} | "
        f"{a.rank_correlation_logits:.4f} | {a.rank_correlation_features:.4f} | {_mixtures(a):.4f} |"
    )


def _page(
    entry: Ruler, agreement: Agreement, twin: Agreement | None, seconds: tuple[float, float], twin_sha: str | None = None
) -> str:
    ruler = read_manifest(PACKAGED_RULERS)["classifier:digits"]
    rows = [
        "| | top-1 agreement | ruler's accuracy | its accuracy | rank correlation (logits) | rank correlation (features) "
        "| rank correlation, class mixtures only (logits) |",
        "|---|---|---|---|---|---|---|",
        _row(f"`steering:digits` ({entry.architecture}, shipped)", agreement),
    ]
    if twin is not None:
        rows.append(_row("the twin it replaced (small-cnn, the training split's odd rows, seed 1)", twin))
    lines = [
        "# The steering network against the ruler",
        "",
        "Made by `.venv/bin/python ci/train_steering.py"
        + (f" --twin OLD_FILE` (OLD_FILE: the twin, sha256 `{twin_sha[:12]}…`, {TWIN_SOURCE}; " if twin_sha else "` (")
        + f"training and measuring it took {seconds[1]:.0f} s of CPU time, {seconds[0]:.0f} s on a shared 2-core "
        f"machine; {entry.epochs} epochs of {entry.train_images} images). Cellular's mixture weights evolve under the FID of "
        "`steering:digits`; every report's FID is the ruler's, `classifier:digits`. They differ in architecture "
        "and in data:",
        "",
        "| network | architecture | input | trained on | sha256 |",
        "|---|---|---|---|---|",
        f"| `classifier:digits` (ruler) | small-cnn (3 conv blocks, 128-d features) | 20×20 | all {ruler.train_images} "
        f"rows of the training split | `{ruler.sha256[:12]}…` |",
        f"| `steering:digits` | {entry.architecture} (2 hidden layers: 256, 128-d features) | "
        f"{entry.image_size}×{entry.image_size} raw pixels | {entry.trained_on} | `{entry.sha256[:12]}…` |",
        "",
        f"Agreement, measured with both pinned files as scoring loads them (float64), against the ruler "
        f"`{(entry.measured_against or '')[:12]}…`:",
        "",
        *rows,
        "",
        f"- **top-1 agreement**: the share of the {agreement.heldout_images} held-out digits (the odd rows of the test "
        "split, which neither network was trained on) whose predicted class the two networks give alike.",
        f"- **rank correlation**: Spearman's, over {len(agreement.fids)} image sets of graded quality (the odd rows of "
        "the training split degraded by noise, blur, shifts, lower contrast, occlusion, and class mixtures that drop "
        "or unbalance classes, as a poor generator mixture does; `fids.csv`), between the FID the ruler gives each "
        "against the training split's even rows and the FID the steering network gives it in its class logits "
        "(cellular's default `mixture_features: logits`) or its 128-d features.",
        "- **class mixtures only**: the same (logits) over the 9 sets that only drop or reweigh classes, the "
        "failures cellular's mixture weights can cause or cure.",
        "",
        "The top-1 agreement and both rank correlations are pinned in `suite/measure/metrics/rulers/rulers.json` with "
        "the ruler's sha256 they were measured against, and copied into every record the network steers "
        "(`steering.architecture`, `trained_on`, `agreement_top1`, `rank_correlation` in the space it steered in, "
        "`measured_against`); `tests/test_steering.py` measures them again from the pinned files and checks this page. "
        "Sets that are plainly worse are worse to both networks (a steering network that disagreed there would steer "
        "nowhere); where the two differ, the mixture weights no longer fit the ruler's own view of quality, its "
        "filters, its data or its initialisation.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGED_RULERS, help="ruler folder to pin it in")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "steering", help="folder of steering.md")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--twin", type=Path, help="an older steering network of the ruler's architecture, to compare")
    args = parser.parse_args()
    twin = _twin(args.twin, ClassifierNet("digits")) if args.twin else None
    wall, cpu = time.perf_counter(), time.process_time()
    entry, agreement = make_steering_network(SteeringSpec("digits", seed=args.seed), args.out, IMAGE_SIZE)
    seconds = (time.perf_counter() - wall, time.process_time() - cpu)
    args.report.mkdir(parents=True, exist_ok=True)
    twin_sha = sha256_file(args.twin) if args.twin else None
    (args.report / "steering.md").write_text(_page(entry, agreement, twin, seconds, twin_sha))
    with (args.report / "fids.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["set", "ruler_fid", "steering_fid_logits", "steering_fid_features"] + (["twin_fid_logits"] if twin else [])
        )
        for i, (name, r, lg, ft) in enumerate(agreement.fids):
            writer.writerow([name, f"{r:.4f}", f"{lg:.4f}", f"{ft:.4f}"] + ([f"{twin.fids[i][2]:.4f}"] if twin else []))
    print(f"{entry.name}  {args.out / entry.file}  sha256 {entry.sha256}")
    print(
        f"held-out accuracy {entry.heldout_accuracy:.4f}; top-1 agreement {agreement.top1:.4f}; rank correlation "
        f"logits {agreement.rank_correlation_logits:.4f}, features {agreement.rank_correlation_features:.4f}; "
        f"{seconds[1]:.1f} s of CPU time ({seconds[0]:.1f} s wall)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
