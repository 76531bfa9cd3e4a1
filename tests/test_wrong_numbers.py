"""Wrong numbers are not passes (issue 52, item 6).

- a baseline whose throughput interval is wider than its estimate ([-1e18, 1e18] made a 100 % drop "within noise",
  exit 0), inverted or not finite, and a throughput below a stated floor (1e-300 images/s), are INVALID, naming the
  file: ``suite compare`` exits 1;
- a generator with negative batch-norm variances (1,600 NaN pixels of 1,600, exit 0, "in [-1, 1]") is refused when
  loaded, and NaN samples are neither written nor scored;
- a shared cache's statistics are checked against the digest written beside them (forged finite mu and sigma
  turned an FID of 1,010 into 310,269);
- a record without a ``schema`` key is refused, not read as schema 1.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from test_hostile_records import CONDITIONAL_P1, DIGITS, digits_records

from suite.analysis.comparable import MIN_IMAGES_PER_S, interval_problem, throughput_problem
from suite.cli import main
from suite.gan.sampling import samples_problem
from suite.measure.metrics import cachefiles, reference
from suite.records.codec import parse_record
from suite.records.record import RecordError


@pytest.mark.parametrize(
    ("ci", "words"),
    [
        ([-1e18, 1e18], "images_per_s_ci95 [-1e+18, 1e+18] is wider than 0.75 times its estimate"),
        ([900.0, 100.0], "images_per_s_ci95 [900, 100] is inverted"),
        ([100.0, None], "has an end that is not a finite number"),
        ([300.0, 400.0], "does not hold images_per_s"),
    ],
)
def test_a_baseline_interval_that_is_not_one_makes_the_comparison_invalid(tmp_path, capsys, ci, words):
    baseline, new = digits_records(), digits_records()
    baseline[0]["images_per_s_ci95"] = ci
    for record in new:  # a 100 % drop, as good as: the new runs are 1,000 times slower
        record["images_per_s"] /= 1000
        record["images_per_s_ci95"] = [c / 1000 for c in record["images_per_s_ci95"]]
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert main(["compare", str(tmp_path / "new.json"), str(tmp_path / "baseline.json")]) == 1
    out = capsys.readouterr().out
    assert f"run {CONDITIONAL_P1[0]} (baseline, {tmp_path / 'baseline.json'}): " in out and words in out
    assert "**INVALID**" in out and "No regression" not in out


def test_a_throughput_below_the_floor_is_invalid(tmp_path, capsys):
    new = digits_records()
    new[0]["images_per_s"], new[0]["images_per_s_ci95"] = 1e-300, [1e-300, 1e-300]
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert main(["compare", str(tmp_path / "new.json"), str(DIGITS)]) == 1
    out = capsys.readouterr().out
    assert f"images_per_s is 1e-300, below the floor of {MIN_IMAGES_PER_S:g} images/s of a measured run" in out


def test_honest_intervals_pass_the_checks():
    for record in digits_records():
        assert throughput_problem(parse_record(record)) is None
    assert interval_problem(100.0, None) is None and interval_problem(100.0, [70.0, 140.0]) is None
    assert interval_problem(100.0, [40.0, 150.0]) is not None  # 110 wide: wider than 75
    assert interval_problem(100.0, [50.0, 150.0]) is not None  # [v/2, 1.5 v] (issue 61): a halving inside its noise


def _generator_run(tmp_path, poison):
    """A run folder with a trained-looking generator bundle, ``poison`` applied to its state."""
    from suite.gan.models import build_pair
    from suite.gan.sampling import GeneratorBundle
    from suite.records.results import GENERATOR_FILE

    generator, _ = build_pair(20, 1, 16, seed=0)
    state = {name: tensor.clone() for name, tensor in generator.state_dict().items()}
    poison(state)
    bundle = GeneratorBundle(
        kind="single",
        generators={"all": state},
        image_size=20,
        channels=1,
        latent_dim=16,
        num_classes=10,
        conditional=False,
        class_prior={c: 0.1 for c in range(10)},
    )
    run = tmp_path / "run"
    run.mkdir()
    bundle.save(run / GENERATOR_FILE)
    return run


def test_a_generator_with_negative_batch_norm_variance_is_refused(tmp_path, capsys):
    def negative(state):
        name = next(n for n in state if n.endswith("running_var"))
        state[name] = -state[name]

    run = _generator_run(tmp_path, negative)
    assert main(["sample", str(run), "--n", "4", "--out", str(tmp_path / "s.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds negative batch-norm variances" in err[0] and str(run / "generator.pt") in err[0]
    assert not (tmp_path / "s.npz").exists()


def test_nan_samples_are_named_not_images():
    images = torch.zeros(4, 1, 20, 20)
    assert samples_problem(images) is None
    images[0, 0, 0, :3] = float("nan")
    assert samples_problem(images) == "3 of its 1,600 sampled pixels are NaN or infinite: not images"


def test_forged_cache_statistics_are_not_used(tmp_path, caplog):
    path = tmp_path / "stats" / "digits-test-0123.npz"
    path.parent.mkdir()
    features = np.random.default_rng(0).normal(size=(50, 4))
    honest = {"mu": features.mean(axis=0), "sigma": np.cov(features, rowvar=False), "features": features}
    cachefiles.write_cached_arrays(path, honest)
    assert set(cachefiles.read_cached_arrays(path)) == {"mu", "sigma", "features"}
    computed = []

    def compute():
        computed.append(True)
        return honest

    # forged finite statistics, the digest beside them left as it was
    np.savez(path, mu=honest["mu"] + 300.0, sigma=honest["sigma"] * 1e4, features=features)
    with caplog.at_level(logging.WARNING):
        values = reference._cached(path, compute)
    assert computed and np.allclose(values["mu"], honest["mu"])
    assert f"{path}: has sha256" in caplog.text and "not used, computed again" in caplog.text
    assert cachefiles.read_cached_arrays(path) is not None  # written again, with its digest

    # a forger who rewrites the digest too: mu must still be the mean of the features stored with it
    cachefiles.write_cached_arrays(path, {**honest, "mu": honest["mu"] + 300.0})
    with caplog.at_level(logging.WARNING):
        assert cachefiles.read_cached_arrays(path) is None
    assert "its mu is not the mean of its features" in caplog.text


def test_a_cache_file_without_its_digest_is_computed_again(tmp_path, caplog):
    path = tmp_path / "untrained-digits-0123.json"
    path.write_text(json.dumps({"fid": 1.0}))
    with caplog.at_level(logging.WARNING):
        assert cachefiles.read_cached_json(path) is None
    assert "no readable digest beside it (untrained-digits-0123.json.sha256)" in caplog.text
    cachefiles.write_cached_json(path, {"fid": 2.0})
    assert cachefiles.read_cached_json(path) == {"fid": 2.0}


def test_a_record_without_a_schema_key_is_refused_by_every_reader(tmp_path, capsys):
    (record,) = digits_records(CONDITIONAL_P1[:1])
    del record["schema"]
    with pytest.raises(RecordError, match="^record: schema: required field is missing"):
        parse_record(record)
    (tmp_path / "new.json").write_text(json.dumps([record]))
    assert main(["compare", str(tmp_path / "new.json"), str(DIGITS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "schema: required field is missing" in err[0]
