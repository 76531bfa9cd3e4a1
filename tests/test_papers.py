"""The papers' experiments: every scenario of scenarios/papers/ dry-runs, and `suite papers` judges the claims."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from suite.analysis.report import DEFAULT_BASELINES
from suite.analysis.report.paper_pages import paper_page, write_papers
from suite.analysis.report.paper_verdicts import FAILS, HOLDS, UNJUDGED
from suite.analysis.report.papers import PAPERS, PaperSetting, setting_differences
from suite.cli import main
from suite.records.record import SCHEMA_VERSION
from suite.records.results import new_record

REPO = Path(__file__).resolve().parent.parent
PAPER_SCENARIOS = sorted((REPO / "scenarios" / "papers").rglob("*.yaml"))


@pytest.mark.parametrize("path", PAPER_SCENARIOS, ids=lambda p: str(p.relative_to(REPO / "scenarios" / "papers")))
def test_every_paper_scenario_dry_runs(path, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SUITE_DATA", str(tmp_path / "no-data"))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    err = caplog.text
    if "name: digits" not in path.read_text():  # the datasets on disk are named, with their folder, in one line
        (line,) = [line for line in err.splitlines() if "not found: looked in" in line]
        assert str(tmp_path / "no-data") in line
    assert path.stem.split("-")[0] in PAPERS  # every scenario belongs to a paper by its name


def test_a_missing_dataset_stops_the_run_before_any_rank(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SUITE_DATA", str(tmp_path))
    (tmp_path / "cifar-10-batches-py").mkdir()
    (tmp_path / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"")
    code = main(["run", str(REPO / "scenarios" / "papers" / "paper000-cifar10.yaml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not (tmp_path / "out").exists()
    assert err == (
        f"error: dataset 'cifar10' not found: looked in {tmp_path / 'cifar-10-batches-py'} for batches.meta, "
        "data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5, test_batch; put them there, or point "
        "dataset.root (or $SUITE_DATA) at the folder that holds cifar-10-batches-py/, or set dataset.download: true "
        "on a machine online"
    )


def _run(scenario, strategy, loss, seed, procs=1, scaling="strong", **fields):
    record = {
        "schema": SCHEMA_VERSION,  # every record names its schema (a record without one is refused)
        "status": "ok",
        "run_id": f"{strategy}-{loss}-p{procs}-{scaling}-s{seed}-r{fields.get('repeat', 0)}",
        "scenario": scenario,
        "strategy": strategy,
        "loss": loss,
        "engine": "mpi",
        "procs": procs,
        "scaling": scaling,
        "seed": seed,
        "dataset": {"name": "digits", "image_size": 20},
        "budget_images": 2560,
    }
    record.update(fields)
    return record


def _scored(is_mean, fid, classes=10):
    return {
        "is_mean": is_mean,
        "fid": fid,
        "tvd": fid / 100,
        "untrained_fid": 1000.0,
        "classes": list(range(classes)),
        "num_classes": 10,
        "features": "classifier:digits",
    }


def _records(runs):
    """The runs' data as the records the claims judge."""
    return [new_record(r) for r in runs]


def _judge(key, records):
    return [claim.judge(_records(records))[0] for claim in PAPERS[key].claims]


def test_paper000_claims_follow_the_tests_of_the_scores():
    ordered = [_run("paper000-x", "data_parallel", "bce", s, quality=_scored(v, 90)) for s, v in enumerate([3.0, 3.1, 3.05])] + [
        _run("paper000-x", "conditional", "bce", s, quality=_scored(v, 80)) for s, v in enumerate([5.0, 5.2, 5.1])
    ]
    ordered += [
        _run("paper000-x", "label_partitioned", "bce", s, 2, quality=_scored(v, 70)) for s, v in enumerate([6.0, 6.1, 6.2])
    ]
    weak = [
        _run("paper000-x", "label_partitioned", "bce", 0, p, "weak", repeat=k, train_s=t, quality=_scored(5, 5, p))
        for p, times in ((1, [10.0, 10.2, 9.9]), (2, [10.1, 10.0, 10.2]))
        for k, t in enumerate(times)
    ]
    assert _judge("paper000", ordered + weak) == [HOLDS, HOLDS, HOLDS]
    swapped = [
        {
            **r,
            "loss": "bce",
            "strategy": {"conditional": "label_partitioned", "label_partitioned": "conditional"}.get(
                r["strategy"], r["strategy"]
            ),
        }
        for r in ordered
    ]
    slow = [{**r, "train_s": r["train_s"] * (2 if r["procs"] == 2 else 1)} for r in weak]
    assert _judge("paper000", swapped + slow) == [FAILS, HOLDS, FAILS]
    one_seed = [r for r in ordered if r["seed"] == 0]
    verdicts = [claim.judge(_records(one_seed)) for claim in PAPERS["paper000"].claims]
    assert [v for v, _ in verdicts] == [UNJUDGED] * 3 and "fewer than 3 runs per arm" in verdicts[0][1]


def test_a_claim_is_judged_only_from_three_runs_per_arm_of_models_that_learned():
    def arm(strategy, values, fids):
        return [
            _run("paper000-x", strategy, "bce", s, 2 if strategy == "label_partitioned" else 1, quality=_scored(v, f))
            for s, (v, f) in enumerate(zip(values, fids))
        ]

    distributed = arm("label_partitioned", [6.0, 6.1, 6.2], [70, 72, 71])
    conditional = arm("conditional", [5.0, 5.2, 5.1], [80, 82, 79])
    claim = PAPERS["paper000"].claims[0].judge

    def first(runs):
        return claim(_records(runs))

    assert first(distributed + conditional)[0] == HOLDS
    two_a_side = first(distributed[:2] + conditional[:2])  # the same scores, one seed fewer: Welch's df about 1.3
    assert two_a_side[0] == UNJUDGED and "fewer than 3 runs per arm" in two_a_side[1]
    # a DC-CGAN whose FIDs are not below 0.9 times its untrained generator's has not learned: no verdict on it
    unlearned = arm("conditional", [5.0, 5.2, 5.1], [980, 890, 1010])
    verdict, evidence = first(distributed + unlearned)
    assert verdict == UNJUDGED and "DC-CGAN has not learned at this scale" in evidence and "1000" in evidence
    # one that fell significantly below it has
    learned = arm("conditional", [5.0, 5.2, 5.1], [500, 520, 480])
    assert first(distributed + learned)[0] == HOLDS


def test_paper001_speedups_beside_the_table():
    runs = [
        _run("paper001-x", "cellular", "mustangs", 0, p, repeat=k, grid=g, train_s=t, budget_images=None)
        for g, p, times in (
            ([1, 2], 1, [20, 20.4, 19.8]),
            ([1, 2], 2, [9.0, 9.1, 8.9]),
            ([2, 2], 1, [40, 41, 39]),
            ([2, 2], 4, [12, 12.2, 11.9]),
        )
        for k, t in enumerate(times)
    ]
    numbers = PAPERS["paper001"].numbers(_records(runs), DEFAULT_BASELINES, PAPERS["paper001"].setting)
    assert numbers["grid"].tolist() == ["1x2", "2x2"]
    assert numbers["speedup (paper)"].tolist() == ["none printed (2x2 to 4x4 only)", 8.53]
    assert numbers["setting"].tolist()[1] == "digits at 20px, not mnist"
    assert _judge("paper001", runs) == [HOLDS, FAILS]  # speedups 2.2 then 3.3: growing; 2.2 > 2 but 3.3 < 4 cells
    both_super = [{**r, "train_s": r["train_s"] / (1.5 if r["procs"] > 1 else 1)} for r in runs]
    assert _judge("paper001", both_super)[1] == HOLDS


def test_differences_name_what_is_not_the_papers():
    run = _run("paper000-x", "conditional", "bce", 0, quality=_scored(5, 5))
    setting = PaperSetting(dataset="mnist", features="inception", epochs=1000, training="1000 epochs")
    assert setting_differences(new_record(run), setting) == (
        "digits at 20px, not mnist; scored with classifier:digits, not inception; an equal budget of 2,560 images, not 1000 epochs"
    )
    same = {
        **run,
        "dataset": {"name": "mnist", "image_size": 32},
        "quality": {"features": "inception"},
        "budget_images": None,
        "epochs": 1000,
    }
    assert setting_differences(new_record(same), setting) == "same setting"
    short = {**same, "epochs": 2, "settings": {"train": {"steps": 100}}}
    assert setting_differences(new_record(short), setting) == "100 steps, not 1000 epochs"
    assert (
        setting_differences(
            new_record({**same, "strategy": "cellular", "loss": "mustangs", "iterations": 10}), replace(setting, iterations=200)
        )
        == "10 iterations, not 200"
    )


def test_pages_are_written_per_paper(tmp_path):
    results = tmp_path / "results" / "paper002-reduced"
    for i, (loss, fid) in enumerate([("wgan-gp", 40), ("wgan-gp", 41), ("wgan-gp", 39), ("bce", 60), ("bce", 62), ("bce", 61)]):
        folder = results / f"run{i}"
        folder.mkdir(parents=True)
        record = _run(
            "paper002-reduced-wcgan", "label_partitioned", loss, i, 2, quality=_scored(6 if loss == "bce" else 7 + i / 10, fid)
        )
        (folder / "result.json").write_text(json.dumps(record))
    other = tmp_path / "results" / "digits" / "run0"
    other.mkdir(parents=True)
    (other / "result.json").write_text(json.dumps(_run("digits", "conditional", "bce", 0, quality=_scored(5, 5))))
    pages = write_papers([tmp_path / "results"], tmp_path / "papers", DEFAULT_BASELINES)
    assert pages == [tmp_path / "papers" / key / "papers.md" for key in ("paper000", "paper001", "paper002", "paper003")]
    text = pages[2].read_text()
    assert "No run of this paper's scenarios yet: `make papers-timing (on a quiet machine)`" in pages[1].read_text()
    assert "| 4x4 | 1920 | 126.68 | 3.42 | 15.17 |" in pages[1].read_text()  # the paper's table, as printed
    assert "none: the paper's text (the abstract) prints no IS or FID" in text
    assert "- **holds**: Per-class W-CGANs improve IS and FID over per-class DC-CGANs at a fixed budget (abstract)." in text
    assert paper_page(PAPERS["paper003"], [], DEFAULT_BASELINES).count(UNJUDGED) == 2


def test_a_quality_claim_says_its_budget_and_which_arm_was_still_improving():
    from suite.analysis.report.paper_verdicts import scale_note

    def runs(last_ratios):
        # three seeds, each with curve points at 1,000 and 2,000 images: the FID's ratio over that last stretch
        return _records(
            {
                "seed": s,
                "curve": [{"clock_s": 1.0, "images": 1000, "fid": 300.0}, {"clock_s": 2.0, "images": 2000, "fid": 300.0 * r}],
            }
            for s, r in enumerate(last_ratios)
        )

    note = scale_note({"W-CGAN": runs([0.5, 0.55, 0.6]), "DC-CGAN": runs([1.0, 1.02, 0.98])})
    assert note.startswith("at 2,000 training images, still improving (FID over the last half): W-CGAN 0.548 ")
    assert "DC-CGAN" not in note
    flat = scale_note({"W-CGAN": runs([1.0, 1.01, 0.99]), "DC-CGAN": runs([1.0, 1.02, 0.98])})
    assert flat.startswith("at 2,000 training images, no arm still improving") and "W-CGAN" in flat
    one_point = {"A": _records([{"seed": 0, "curve": [{"clock_s": 1.0, "images": 1000, "fid": 300.0}]}])}
    assert scale_note(one_point) == "whether the arms were still improving is not known (fewer than two curve points)"
