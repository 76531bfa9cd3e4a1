"""Wrong numbers fail (issue 61, item 4): a baseline's spreads and intervals, and cached statistics.

- ``suite compare`` passed a twice-slower or twice-worse run when the baseline held a huge spread in another field
  (``telemetry.step_ci95 = 1e18``, ``quality.kid_std = 1e18``, an ``images_per_s_ci95`` of [v/2, 1.5 v]): every
  spread and interval field it reads is now checked for its range against the value it qualifies, and a record
  whose field is out of range is ``INVALID`` (exit 1), its row naming the field;
- a shared cache's ``sigma`` multiplied by 100 with its ``.sha256`` rewritten moved a FID from 979 to 48,489 with
  no warning: the stored covariance is checked against the stored features (Freivalds' probes), and a few stored
  feature rows against the network's features of their images.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from test_hostile_records import CONDITIONAL_P1, digits_records

from suite.analysis.comparable import MAX_INTERVAL_WIDTH, record_problem, spread_problem
from suite.cli import main
from suite.measure.metrics import cachefiles, reference
from suite.measure.metrics.scores import statistics
from suite.records.codec import parse_record


def _compare(tmp_path, capsys, baseline, new):
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    (tmp_path / "new.json").write_text(json.dumps(new))
    code = main(["compare", str(tmp_path / "new.json"), str(tmp_path / "baseline.json")])
    return code, capsys.readouterr().out


def _twice_slower(records):
    for record in records:
        record["images_per_s"] /= 2
        record["images_per_s_ci95"] = [c / 2 for c in record["images_per_s_ci95"]]
        record["telemetry"]["step_p50"] *= 2
        record["telemetry"]["step_mean"] *= 2
        record["telemetry"]["step_ci95"] *= 2
    return records


def _twice_worse(records):
    for record in records:
        record["quality"]["kid_mean"] *= 2
        record["quality"]["kid_std"] *= 2
        record["quality"]["fid"] *= 2
    return records


def _set(record, path, value):
    *parents, last = path.split(".")
    for key in parents:
        record = record[key]
    record[last] = value


def _wide_interval(record):
    value = record["images_per_s"]
    return [value / 2, 1.5 * value]


@pytest.mark.parametrize(
    ("field", "value", "worse", "words"),
    [
        ("telemetry.step_ci95", 1e18, _twice_slower, "telemetry.step_ci95 1e+18 is over 0.5 times step_mean"),
        ("quality.kid_std", 1e18, _twice_worse, "quality.kid_std 1e+18 is over 2 times its KID's size"),
        ("images_per_s_ci95", _wide_interval, _twice_slower, f"is wider than {MAX_INTERVAL_WIDTH:g} times its estimate"),
        ("telemetry.step_ci95", -1.0, _twice_slower, "telemetry.step_ci95 -1.0 (step_mean"),
        ("quality.kid_std", -1.0, _twice_worse, "quality.kid_std -1.0 (kid_mean"),
    ],
)
def test_a_huge_spread_in_any_baseline_field_fails_the_comparison_naming_the_field(tmp_path, capsys, field, value, worse, words):
    baseline, new = digits_records(), worse(digits_records())
    for record in baseline:  # every run of the configuration, so that no honest repeat is left to compare
        _set(record, field, value(record) if callable(value) else value)
    code, out = _compare(tmp_path, capsys, baseline, new)
    assert code == 1 and "**INVALID**" in out and "No regression" not in out
    assert f"run {CONDITIONAL_P1[0]} (baseline, {tmp_path / 'baseline.json'}): {field} " in out.replace("`", "")
    assert words in out


@pytest.mark.parametrize("worse", [_twice_slower, _twice_worse])
def test_honest_baselines_still_catch_a_twice_slower_or_worse_run(tmp_path, capsys, worse):
    # the label-partitioned DC-CGAN's P = 1 runs: seeds whose FIDs spread a few per cent (the DC-CGAN's at lr 0.003
    # spread so widely over 3 seeds that twice its FID is within their noise, as compare rightly says)
    runs = [f"label_partitioned-bce-mpi-p1-s{seed}-r0" for seed in (0, 1, 2)]
    code, out = _compare(tmp_path, capsys, digits_records(runs), worse(digits_records(runs)))
    assert code == 1 and "REGRESSION" in out and "INVALID" not in out


def test_every_committed_record_has_spreads_in_range():
    from conftest import REPO

    for path in sorted((REPO / "reports").glob("**/records.json")):
        for data in json.loads(path.read_text()):
            if data.get("status") == "ok":
                record = parse_record({**data, "schema": data.get("schema", 1)}) if "schema" not in data else parse_record(data)
                assert spread_problem(record) is None, (path, data["run_id"], spread_problem(record))
                assert record_problem(record) is None or "images_per_s" in record_problem(record), path


def test_a_kid_near_zero_may_spread_more_than_itself_up_to_the_untrained_scale():
    (data,) = digits_records(CONDITIONAL_P1[:1])
    q = data["quality"]
    q["kid_mean"], q["untrained_kid"] = 0.001, 100.0
    q["kid_std"] = 0.5  # 500 times the KID, a quarter of 1 % of the untrained KID: an honest spread near zero
    assert spread_problem(parse_record(data)) is None
    q["kid_std"] = 5.0  # over twice 1 % of the untrained KID
    assert "quality.kid_std 5 is over 2 times" in spread_problem(parse_record(data))


def _honest(features):
    mu, sigma = statistics(features)
    return {"mu": mu, "sigma": sigma, "n": np.array(len(features)), "features": features}


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (lambda v: {**v, "sigma": v["sigma"] * 100}, "its sigma is not the covariance of its features"),
        (lambda v: {**v, "sigma": v["sigma"] + 1e-3 * np.eye(len(v["sigma"]))}, "its sigma is not the covariance"),
        (lambda v: {**v, "sigma": np.triu(v["sigma"])}, "its sigma is not symmetric"),
        (lambda v: {**v, "n": np.array(3)}, "its n is not the count of its 400 features"),
    ],
)
def test_forged_statistics_with_their_digest_rewritten_are_not_used(tmp_path, caplog, forge, words):
    path = tmp_path / "stats" / "digits-train-0123.npz"
    path.parent.mkdir()
    honest = _honest(np.random.default_rng(0).normal(size=(400, 32)).astype(np.float32) * 3)
    cachefiles.write_cached_arrays(path, honest)
    assert cachefiles.read_cached_arrays(path) is not None
    cachefiles.write_cached_arrays(path, forge(honest))  # the forger rewrites the .sha256 beside it too
    with caplog.at_level(logging.WARNING):
        assert cachefiles.read_cached_arrays(path) is None
    assert f"{path}: {words}" in caplog.text and "not used, computed again" in caplog.text


def test_stored_features_that_are_not_the_networks_are_found_by_recomputing_a_few_rows():
    images = np.random.default_rng(1).normal(size=(50, 6))
    weights = np.random.default_rng(2).normal(size=(6, 3))

    def net(batch):
        return batch @ weights, None

    def fetch(positions):
        return images[positions]

    features = images @ weights
    assert reference.features_problem(features, fetch, net) is None
    forged = features.copy()
    forged[:, 0] += 5.0  # every row moved: any row recomputed shows it
    assert "are not the network's features of those images" in reference.features_problem(forged, fetch, net)


def _samples(tmp_path):
    path = tmp_path / "samples.npz"
    images = np.random.default_rng(0).uniform(-1, 1, size=(200, 1, 20, 20)).astype(np.float32)
    np.savez(path, images=images)
    return path


def test_suite_score_is_not_moved_by_a_forged_sigma_with_its_digest(tmp_path, capsys, caplog):
    samples = _samples(tmp_path)
    command = ["score", "--samples", str(samples), "--dataset", "digits", "--n", "200", "--json"]
    assert main(command) == 0
    honest = json.loads(capsys.readouterr().out)
    stats = sorted((reference.cache_dir() / "stats").glob("digits-train-*.npz"))
    assert stats, "the real statistics were cached"
    for path in stats:
        with np.load(path) as stored:
            values = {k: stored[k] for k in stored.files}
        if "sigma" in values:
            cachefiles.write_cached_arrays(path, {**values, "sigma": values["sigma"] * 100})  # digest rewritten too
    with caplog.at_level(logging.WARNING):
        assert main(command) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["fid"] == pytest.approx(honest["fid"], rel=1e-6)  # not 50 times larger
    assert "its sigma is not the covariance of its features; not used, computed again" in caplog.text
