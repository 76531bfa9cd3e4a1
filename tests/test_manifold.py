"""Precision, recall, density and coverage (suite.measure.metrics.manifold): parity with the reference definitions,
the order of the real and generated sets (torch-fidelity #58), the blocks, and k refused out of range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from suite.measure.metrics import manifold
from suite.measure.metrics.evaluate import manifold_scores


def reference_prdc(real: np.ndarray, fake: np.ndarray, k: int) -> dict[str, float]:
    """The definitions as Naeem et al. 2020 (Eqs. 1-4 of their paper, and their ``prdc`` package) state them: full
    Euclidean distance matrices, a radius the k-th neighbour's distance with the point itself at distance 0 counted
    first, strict ``<`` against a radius, real radii for precision, density and coverage, fake radii for recall."""
    real_real, fake_fake, real_fake = cdist(real, real), cdist(fake, fake), cdist(real, fake)
    real_radii = np.sort(real_real, axis=1)[:, k]
    fake_radii = np.sort(fake_fake, axis=1)[:, k]
    in_real_ball = real_fake < real_radii[:, None]  # (real i, fake j): fake j inside real i's ball
    return {
        "precision": float(in_real_ball.any(axis=0).mean()),
        "recall": float((real_fake < fake_radii[None, :]).any(axis=1).mean()),
        "density": float(in_real_ball.sum(axis=0).mean() / k),
        "coverage": float((real_fake.min(axis=1) < real_radii).mean()),
    }


def modes(rng: np.random.Generator, centres: np.ndarray, n: int, spread: float = 0.3) -> np.ndarray:
    """``n`` points around ``centres`` (drawn evenly among them)."""
    return centres[rng.integers(len(centres), size=n)] + spread * rng.normal(size=(n, centres.shape[1]))


@pytest.mark.parametrize(
    ("k", "n_real", "n_fake", "shift"), [(1, 60, 60, 0.0), (3, 200, 150, 0.5), (5, 300, 400, 1.0), (10, 120, 90, 0.2)]
)
def test_parity_with_the_reference_definitions(k: int, n_real: int, n_fake: int, shift: float) -> None:
    rng = np.random.default_rng(k * 1000 + n_real)
    real = rng.normal(size=(n_real, 16))
    fake = rng.normal(size=(n_fake, 16)) * 1.3 + shift
    mine, theirs = manifold.prdc(real, fake, k), reference_prdc(real, fake, k)
    assert mine == pytest.approx(theirs, abs=1e-12)
    assert 0 < theirs["coverage"] < 1 and 0 < theirs["precision"] < 1  # a case where every score is informative


def test_blocks_give_the_scores_of_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    real, fake = rng.normal(size=(130, 8)), rng.normal(size=(110, 8)) + 0.4
    whole = manifold.prdc(real, fake, 4)
    monkeypatch.setattr(manifold, "BLOCK_ENTRIES", 500)  # blocks of 3-4 rows, the last one short
    assert manifold.prdc(real, fake, 4) == whole == pytest.approx(reference_prdc(real, fake, 4), abs=1e-12)


def test_given_real_radii_are_the_computed_ones() -> None:
    rng = np.random.default_rng(3)
    real, fake = rng.normal(size=(80, 6)), rng.normal(size=(70, 6))
    radii = manifold.nearest_neighbour_radii(real, 3)
    assert radii == pytest.approx(np.sort(cdist(real, real), axis=1)[:, 3], abs=1e-12)
    assert manifold.prdc(real, fake, 3, radii) == manifold.prdc(real, fake, 3)


def test_a_generator_of_a_few_real_modes_has_high_precision_and_low_recall() -> None:
    """The order of the sets: samples from 2 of the 10 real modes are all real-looking (precision, density high) but
    miss 8 modes (recall, coverage low). Swapping real and generated (torch-fidelity #58) reads the reverse."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(10, 32)) * 10
    real = modes(rng, centres, 1000)
    fake = modes(rng, centres[:2], 1000)
    scores = manifold.prdc(real, fake, 5)
    assert scores["precision"] > 0.7 and scores["density"] > 0.7
    assert 0.1 < scores["recall"] < 0.3 and 0.1 < scores["coverage"] < 0.3
    assert scores["precision"] > 3 * scores["recall"]
    swapped = manifold.prdc(fake, real, 5)
    assert swapped["recall"] > 0.7 and swapped["precision"] < 0.3  # what a swap would report: caught above


def test_equal_distributions_score_near_one_and_a_constant_generator_covers_nothing() -> None:
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(10, 32)) * 10
    real, fake = modes(rng, centres, 800), modes(rng, centres, 800)
    same = manifold.prdc(real, fake, 5)
    assert min(same["precision"], same["recall"]) > 0.75 and same["coverage"] > 0.9 and 0.8 < same["density"] < 1.25
    off = np.zeros((800, 32)) + 1e-3 * rng.normal(size=(800, 32))  # all alike, between the modes
    assert manifold.prdc(real, off, 5) == {"precision": 0.0, "recall": 0.0, "density": 0.0, "coverage": 0.0}
    on_a_mode = np.repeat(centres[:1], 800, axis=0) + 1e-3 * rng.normal(size=(800, 32))  # all alike, at a mode's centre
    collapsed = manifold.prdc(real, on_a_mode, 5)
    assert collapsed["coverage"] < 0.1 and collapsed["recall"] == 0.0  # at most the one mode's share


@pytest.mark.parametrize(
    ("k", "n_real", "n_fake", "said"), [(0, 50, 50, "at least 1"), (5, 5, 50, "5 real"), (5, 50, 4, "4 generated")]
)
def test_k_out_of_range_is_refused_naming_the_counts(k: int, n_real: int, n_fake: int, said: str) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=said):
        manifold.prdc(rng.normal(size=(n_real, 3)), rng.normal(size=(n_fake, 3)), k)


def test_manifold_scores_compare_with_as_many_real_rows_as_samples() -> None:
    """A whole real split (the standard protocol) is compared on as many rows as samples, the same rows each time."""
    rng = np.random.default_rng(2)
    real, fake = rng.normal(size=(900, 8)), rng.normal(size=(300, 8))
    first, again = manifold_scores(fake, real, 5), manifold_scores(fake, real, 5)
    assert first == again and first["prdc_n_real"] == 300 and first["prdc_k"] == 5
    assert manifold_scores(fake[:5], real, 5)["coverage"] is None  # too few for a 5th neighbour: null, FID untouched


@pytest.mark.slow
def test_the_scoring_function_gives_every_model_the_four_scores_and_a_collapse_reads_as_one():
    """Through ``evaluate_images`` on the pinned digits ruler: held-out real digits cover the real ones, one digit
    repeated with the collapsed seed's pixel noise covers next to none (``suite.analysis.collapse``), and samples
    that cannot be scored carry null scores with their k."""
    from suite.analysis.collapse import collapsed
    from suite.gan.data import load_dataset
    from suite.measure.metrics.evaluate import evaluate_images
    from suite.measure.metrics.features import ClassifierNet
    from suite.measure.metrics.reference import Reference, reference_rows
    from suite.records.scored import Quality

    real = load_dataset("digits", 20, "train")
    n = 300
    images, labels = real.fetch(np.setdiff1d(np.arange(len(real)), reference_rows(len(real), n))[:n])
    ref = Reference("digits", 20, features="classifier", n=n, prdc_k=5)
    networks = (ClassifierNet("digits"),) * 2
    healthy = evaluate_images(images, labels, ref, networks)
    assert healthy["coverage"] > 0.8 and healthy["precision"] > 0.8 and healthy["recall"] > 0.8
    assert (healthy["prdc_k"], healthy["prdc_n_real"], healthy["n"]) == (5, n, n)
    one_digit = (
        images[:1].expand(n, -1, -1, -1) + 0.012 * torch.randn(n, 1, 20, 20, generator=torch.Generator().manual_seed(0))
    ).clamp(-1, 1)
    alike = evaluate_images(one_digit, np.full(n, -1), ref, networks)
    assert alike["coverage"] < 0.05 and alike["recall"] == 0.0

    def record(block: dict) -> object:
        return type(
            "R",
            (),
            {
                "quality": Quality(
                    **{k: v for k, v in block.items() if k in Quality.__dataclass_fields__ and not k.startswith("per_class")}
                )
            },
        )()

    assert collapsed(record(alike)) is True and collapsed(record(healthy)) is False
    constant = evaluate_images(torch.zeros(n, 1, 20, 20), np.full(n, -1), ref, networks)
    assert constant["coverage"] is None and constant["prdc_k"] is None and collapsed(record(constant)) is True
