"""`suite compare`: the regression gate on real records, and its noise rule on known numbers."""

import json
from pathlib import Path

import pytest

from suite.analysis.compare import IMPROVED, OK, REGRESSION, WITHIN_NOISE, Measure, judge
from suite.cli import main
from suite.measure.metrics.features import ClassifierNet
from suite.records.codec import record_data
from suite.records.results import iter_records, new_record, write_record

P1, P2 = "data_parallel / bce / mpi / P=1", "data_parallel / bce / mpi / P=2"


COMPARED = [f"data_parallel-bce-mpi-p{p}-r{r}" for p in (1, 2) for r in (0, 1)]
"""The shared small sweep's runs the compare tests read (tests/conftest.py: small_sweep_scenario)."""


@pytest.fixture(scope="module")
def results(small_sweep) -> Path:
    """Real records: data-parallel MPI at P = 1 and 2, two repeats each, scored with the classifier (the shared small
    sweep's, in a folder of their own)."""
    assert small_sweep.code == 0 and set(COMPARED) <= set(small_sweep.records)
    return small_sweep.subset("compare", COMPARED)


def edited_copy(results: Path, to: Path, edit, procs: int | None = None) -> Path:
    """A copy of the records of ``results`` with ``edit(data)`` applied to the data of those of ``procs`` (all when None)."""
    for record in iter_records(results):
        data = record_data(record)
        if procs is None or record.procs == procs:
            edit(data)
        write_record(to / record.run_id, new_record(data))
    return to


def scale_images_per_s(factor: float):
    def edit(record):
        record["images_per_s"] *= factor
        record["images_per_s_ci95"] = [v * factor for v in record["images_per_s_ci95"]]

    return edit


def compare_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["compare", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def row(report: dict, config: str, metric: str) -> dict:
    (found,) = [r for r in report["rows"] if r["config"] == config and r["metric"] == metric]
    return found


@pytest.mark.multiproc
def test_results_compared_with_themselves_pass(results, capsys):
    code, report = compare_json(capsys, results, results)
    assert code == 0 and report["regressions"] == 0 and report["environment"] == []
    compared = {(r["config"], r["metric"]) for r in report["rows"]}
    assert compared == {
        (c, m) for c in (P1, P2) for m in ("images_per_s", "step_p50", "comm_share", "comm_bytes", "fid", "kid")
    } | {(P2, "speedup")}  # no speedup at P=1
    assert {r["verdict"] for r in report["rows"]} == {OK} and all(r["change"] == 0 for r in report["rows"])
    fid = row(report, P1, "fid")["baseline"]
    assert fid["lo"] == fid["hi"] == fid["value"] > 0  # the two repeats score the same generator: no FID noise


@pytest.mark.multiproc
def test_30_percent_lower_images_per_s_fails_with_that_row_marked(results, tmp_path, capsys):
    slower = edited_copy(results, tmp_path / "slower", scale_images_per_s(0.7), procs=1)
    code, report = compare_json(capsys, slower, results)
    assert code == 1
    assert [(r["config"], r["metric"]) for r in report["rows"] if r["verdict"] == REGRESSION] == [(P1, "images_per_s")]
    assert row(report, P1, "images_per_s")["change"] == pytest.approx(-30.0)
    assert main(["compare", str(slower), str(results)]) == 1
    text = capsys.readouterr().out
    assert "**1 regression**: data_parallel / bce / mpi / P=1: images_per_s." in text
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {P1} | images_per_s |")]
    assert "| -30.0 % | 10 % | **REGRESSION** |" in line


@pytest.mark.multiproc
def test_25_percent_higher_fid_beyond_its_noise_fails(results, tmp_path, capsys):
    def worse_fid(record):
        record["quality"]["fid"] *= 1.25

    code, report = compare_json(capsys, edited_copy(results, tmp_path / "worse", worse_fid, procs=2), results)
    assert code == 1
    fid = row(report, P2, "fid")
    assert fid["verdict"] == REGRESSION and fid["change"] == pytest.approx(25.0)
    assert row(report, P1, "fid")["verdict"] == OK


@pytest.mark.multiproc
def test_a_difference_smaller_than_the_noise_passes_and_a_larger_one_fails(results, tmp_path, capsys):
    _, report = compare_json(capsys, results, results)
    base = row(report, P1, "images_per_s")["baseline"]
    value, below, above = base["value"], base["value"] - base["lo"], base["hi"] - base["value"]
    # Half the baseline's own lower half-width: inside the noise, even with no tolerance at all.
    within = edited_copy(results, tmp_path / "within", scale_images_per_s(1 - 0.5 * below / value), procs=1)
    code, report = compare_json(capsys, within, results, "--tolerance", "images_per_s=0")
    assert code == 0 and row(report, P1, "images_per_s")["verdict"] == WITHIN_NOISE
    # Beyond the combined half-widths of both sides (the copy's upper one is at most the baseline's).
    drop = 1.1 * (below**2 + above**2) ** 0.5
    assert drop < 0.9 * value, "these records are too noisy to test the rule"
    beyond = edited_copy(results, tmp_path / "beyond", scale_images_per_s(1 - drop / value), procs=1)
    code, report = compare_json(capsys, beyond, results, "--tolerance", "images_per_s=0")
    assert code == 1 and row(report, P1, "images_per_s")["verdict"] == REGRESSION
    # ... and that drop passes with a tolerance above it
    code, report = compare_json(capsys, beyond, results, "--tolerance", f"images_per_s={100 * drop / value + 1}")
    assert code == 0 and row(report, P1, "images_per_s")["verdict"] == OK


@pytest.mark.multiproc
def test_nothing_matching_exits_2_and_names_both_sides(results, tmp_path, capsys):
    def other_engine(record):
        record["engine"] = "torch"

    other = edited_copy(results, tmp_path / "torch", other_engine)
    assert main(["compare", str(results), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: nothing to compare: no configuration matches.") and len(err.splitlines()) == 1
    assert f"New ({results}): {P1}; {P2}." in err
    assert f"Baseline ({other}): data_parallel / bce / torch / P=1; data_parallel / bce / torch / P=2" in err


@pytest.mark.multiproc
def test_different_devices_are_refused_unless_allowed(results, tmp_path, capsys):
    def on_a_gpu(record):
        record["device"] = "NVIDIA H100 80GB HBM3"

    gpu = edited_copy(results, tmp_path / "gpu", on_a_gpu)
    assert main(["compare", str(gpu), str(results)]) == 2
    cores = next(iter_records(results)).cores_per_node
    assert (
        capsys.readouterr().err.strip()
        == f"error: the baseline ran on cpu ({cores} cores) and the new results on NVIDIA H100 80GB HBM3: timings of "
        "different devices are not comparable; pass --allow-different-device to compare them anyway"
    )
    code, report = compare_json(capsys, gpu, results, "--allow-different-device")
    assert code == 0
    assert report["environment"] == [{"item": "device", "baseline": f"cpu ({cores} cores)", "new": "NVIDIA H100 80GB HBM3"}]


@pytest.mark.multiproc
def test_environment_differences_are_listed_at_the_top(results, tmp_path, capsys):
    def other_environment(record):
        record["env"]["torch"] = "9.9.9"
        if record["procs"] == 2:
            record["threads_per_rank"] += 1

    changed = edited_copy(results, tmp_path / "env", other_environment)
    assert main(["compare", str(changed), str(results)]) == 0
    text = capsys.readouterr().out
    environment = text.split("## Environment")[1].split("## Metrics")[0]
    torch = next(iter_records(results)).env["torch"]
    threads = next(r for r in iter_records(results) if r.procs == 2).threads_per_rank
    assert f"| version of torch | {torch} | 9.9.9 |" in environment
    assert f"| threads per rank ({P2}) | {threads} | {threads + 1} |" in environment


@pytest.mark.multiproc
def test_a_failed_run_is_a_regression(results, tmp_path, capsys):
    failed = edited_copy(results, tmp_path / "failed", lambda r: None)
    record = json.loads((failed / "data_parallel-bce-mpi-p2-r1" / "result.json").read_text())
    write_record(
        failed / record["run_id"], new_record({**record, "status": "failed", "error": "RuntimeError: boom\nTraceback ..."})
    )
    code, report = compare_json(capsys, failed, results)
    assert code == 1
    assert row(report, "data_parallel-bce-mpi-p2", "status") == {
        "config": "data_parallel-bce-mpi-p2",
        "metric": "status",
        "baseline": None,
        "new": None,
        "change": None,
        "unit": "",
        "tolerance": 0.0,
        "verdict": REGRESSION,
        "note": "run data_parallel-bce-mpi-p2-r1 failed: RuntimeError: boom",
    }
    assert [(r["config"], r["metric"]) for r in report["rows"] if r["verdict"] == REGRESSION] == [
        ("data_parallel-bce-mpi-p2", "status")
    ]
    assert row(report, P2, "images_per_s")["change"] is not None  # the other repeat is still compared


@pytest.mark.multiproc
def test_kid_is_compared_when_recorded(results, tmp_path, capsys):
    def kid(mean):
        def edit(record):
            record["quality"].update(kid_mean=mean, kid_std=0.001)

        return edit

    base = edited_copy(results, tmp_path / "kid-base", kid(0.020))
    new = edited_copy(results, tmp_path / "kid-new", kid(0.030))
    code, report = compare_json(capsys, new, base)
    assert code == 1
    assert row(report, P1, "kid")["verdict"] == REGRESSION and row(report, P1, "kid")["change"] == pytest.approx(50.0)
    assert row(report, P1, "kid")["baseline"] == {"value": 0.020, "lo": 0.019, "hi": 0.021}


@pytest.mark.multiproc
def test_quality_from_another_feature_network_is_not_compared(results, tmp_path, capsys):
    def inception(record):
        record["quality"].update(features="inception", fid=record["quality"]["fid"] * 2)

    code, report = compare_json(capsys, edited_copy(results, tmp_path / "inception", inception), results)
    fid = row(report, P1, "fid")
    assert code == 0 and fid["verdict"] == "n/a" and fid["change"] is None
    pinned = ClassifierNet("digits").sha256[:12]
    assert fid["note"] == (  # the shared small sweep learns digits 0, 1 and 2
        f"different ruler or sample count: classifier:digits {pinned}, n=150, classes 0,1,2 vs inception {pinned}, n=150, "
        "classes 0,1,2"
    )


@pytest.mark.multiproc
def test_quality_from_another_ruler_file_of_the_same_name_is_not_compared(results, tmp_path, capsys):
    def retrained(record):
        record["quality"].update(ruler_sha256="0" * 64, fid=record["quality"]["fid"] * 2)

    code, report = compare_json(capsys, edited_copy(results, tmp_path / "retrained", retrained), results)
    fid = row(report, P1, "fid")
    assert code == 0 and fid["verdict"] == "n/a" and "classifier:digits 000000000000, n=150" in fid["note"]


@pytest.mark.multiproc
def test_a_stored_baseline_file_or_its_folder(results, tmp_path, capsys):
    stored = tmp_path / "baselines" / "records.json"
    stored.parent.mkdir()
    stored.write_text(json.dumps([record_data(r) for r in iter_records(results)], indent=1))
    for baseline in (stored, stored.parent):
        code, report = compare_json(capsys, results, baseline)
        assert code == 0 and report["baseline"] == str(baseline) and len(report["rows"]) == 13


# --- without runs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metric, base, new, tolerance, verdict",
    [
        ("images_per_s", Measure(100, 95, 105), Measure(70, 66, 74), 10, REGRESSION),
        ("images_per_s", Measure(100, 60, 140), Measure(70, 40, 100), 10, WITHIN_NOISE),
        ("images_per_s", Measure(100, 95, 105), Measure(93, 90, 96), 10, OK),  # outside the noise, within the tolerance
        ("images_per_s", Measure(100, 95, 105), Measure(130, 125, 135), 10, IMPROVED),
        ("step_p50", Measure(0.10, 0.09, 0.11), Measure(0.13, 0.12, 0.14), 10, REGRESSION),  # lower is better
        ("comm_share", Measure(0.20, 0.20, 0.20), Measure(0.26, 0.26, 0.26), 5, REGRESSION),  # +6 points
        ("comm_share", Measure(0.20, 0.20, 0.20), Measure(0.24, 0.24, 0.24), 5, OK),  # +4 points
        ("fid", Measure(50, 50, 50), Measure(62.5, 62.5, 62.5), 10, REGRESSION),
    ],
)
def test_judge(metric, base, new, tolerance, verdict):
    assert judge(metric, base, new, tolerance)[1] == verdict


def test_noise_is_the_combined_half_width():
    # The intervals overlap in both cases; the difference of 10 exceeds √(6² + 6²) = 8.5 but not √(8² + 8²) = 11.3.
    assert judge("images_per_s", Measure(100, 94, 106), Measure(90, 84, 96), 5)[1] == REGRESSION
    assert judge("images_per_s", Measure(100, 92, 108), Measure(90, 82, 98), 5)[1] == WITHIN_NOISE


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tolerance", "fps=3"], "--tolerance fps=3: expected METRIC=NUMBER with METRIC one of images_per_s, step_p50, "),
        (["--tolerance", "fid=lots"], "--tolerance fid=lots: 'lots' is not a number"),
        (["--tolerance", "fid=-1"], "--tolerance fid=-1: must be a non-negative number"),
    ],
)
def test_bad_tolerances_are_one_clear_line(tmp_path, capsys, args, message):
    assert main(["compare", str(tmp_path), str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and len(err.strip().splitlines()) == 1


def test_unreadable_inputs_are_one_clear_line(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nowhere"), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: no result.json in its run folders and no records.json"
    stored = tmp_path / "records.json"
    stored.write_text('{"run_id": "x"}')
    assert main(["compare", str(tmp_path / "nowhere"), str(stored)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {stored}: expected a non-empty JSON list of result records, as `suite report` writes them"
