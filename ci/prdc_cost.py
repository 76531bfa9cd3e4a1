"""What precision, recall, density and coverage add to scoring one model: the scoring function timed with and without
them, alternately in one process (so a busy host slows both alike), on the main job's ruler and sample count.

``python ci/prdc_cost.py [samples] [repeats]``: prints the median time of each and their ratio. The budget (issue 65):
at most 10 % of a run's scoring time. Scoring also samples the generator, which this leaves out: the share printed is
an upper bound.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import torch

from suite.gan.data import load_dataset
from suite.measure.metrics import evaluate as evaluate_module
from suite.measure.metrics.evaluate import evaluate_images
from suite.measure.metrics.reference import Reference


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    ref = Reference(dataset="digits", image_size=20, features="classifier", n=n)
    networks = ref.networks()
    data = load_dataset("digits", 20, "test")
    images, _ = data.fetch(np.arange(len(data)) % len(data))
    images = images[torch.randint(len(images), (n,), generator=torch.Generator().manual_seed(0))]
    images = (images + 0.05 * torch.randn(images.shape, generator=torch.Generator().manual_seed(1))).clamp(-1, 1)
    labels = np.full(n, -1)
    with_prdc = evaluate_module.manifold_scores
    spent: list[float] = []

    def timed(features: np.ndarray, real: np.ndarray, k: int) -> dict:
        start = time.perf_counter()
        out = with_prdc(features, real, k)
        spent.append(time.perf_counter() - start)
        return out

    def without(features: np.ndarray, real: np.ndarray, k: int) -> dict:
        return {}

    evaluate_images(images, labels, ref, networks)  # caches warm, the real radii computed once (as in a run)
    times: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(repeats):
        for name, scorer in (("with", timed), ("without", without)):
            evaluate_module.manifold_scores = scorer  # type: ignore[assignment]
            start = time.perf_counter()
            evaluate_images(images, labels, ref, networks)
            times[name].append(time.perf_counter() - start)
    evaluate_module.manifold_scores = with_prdc
    a, b = statistics.median(times["with"]), statistics.median(times["without"])
    share = sum(spent) / (sum(times["with"]) - sum(spent))
    print(f"scoring {n} samples: {b:.3f} s without, {a:.3f} s with precision/recall/density/coverage (medians)")
    print(
        f"their own time inside the scoring function: +{100 * share:.1f} % of the rest of it (difference of medians +{100 * (a / b - 1):.1f} %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
