"""The report's first screen from synthetic records: headline rows, checks, findings, warnings."""

import pytest
from test_report import quality, record

from suite.findings import findings, headline, not_learned_warnings
from suite.metrics.signals import not_learned
from suite.report import scaling_table, write_report
from suite.results import load_records, write_record


def learned(fid=40.0, **extra):
    return {**quality(fid=fid), "pixel_std": 0.4, "untrained_fid": 1200.0, **extra}


def target(reached, clock=None, best=30.0):
    return {
        "metric": "fid",
        "target": 50.0,
        "features": "classifier:digits",
        "n": 500,
        "reached": reached,
        "clock_s": clock,
        "step": 10 if reached else None,
        "best": best,
        "points": 4,
    }


@pytest.fixture
def scenario(tmp_path):
    root = tmp_path / "results"
    runs = [
        record(
            "dp-p1",
            procs=1,
            train_s=100.0,
            quality=learned(60.0),
            time_to_target=target(False, best=60.0),
            replicas_identical=True,
            model_digest="a",
        ),
        record(
            "dp-p2",
            procs=2,
            train_s=55.0,
            quality=learned(45.0),
            time_to_target=target(True, 40.0),
            replicas_identical=True,
            model_digest="b",
        ),
        record(
            "dpt-p2",
            engine="torch",
            procs=2,
            train_s=60.0,
            quality=learned(45.0),
            time_to_target=target(True, 44.0),
            replicas_identical=True,
            model_digest="b",
        ),
        record(
            "lp-p1",
            strategy="label_partitioned",
            engine="mpi",
            procs=1,
            train_s=80.0,
            quality=learned(35.0),
            time_to_target=target(True, 70.0),
            classes=list(range(10)),
            model_digest="c",
            replicas_identical=True,
        ),
        record(
            "lp-p2",
            strategy="label_partitioned",
            engine="mpi",
            procs=2,
            train_s=40.0,
            quality=learned(30.0),
            time_to_target=target(True, 35.0),
            classes=list(range(10)),
            model_digest="c",
            replicas_identical=True,
        ),
        record(
            "cel-p1",
            strategy="cellular",
            engine="mpi",
            procs=1,
            train_s=90.0,
            model_digest="d",
            quality={**quality(fid=1190.0, is_mean=1.01), "pixel_std": 0.01, "untrained_fid": 1200.0},
            time_to_target=target(False, best=1190.0),
        ),
        record(
            "cel-p2",
            strategy="cellular",
            engine="mpi",
            procs=2,
            train_s=50.0,
            model_digest="e",
            oversubscribed=True,
            quality={**quality(fid=1190.0, is_mean=1.01), "pixel_std": 0.01, "untrained_fid": 1200.0},
            time_to_target=target(False, best=1190.0),
        ),
    ]
    for r in runs:
        write_record(root / r["run_id"], r)
    return root


def tables(root):
    frame = load_records(root)
    records = [r for r in (__import__("suite.results", fromlist=["iter_records"]).iter_records(root))]
    scaling = {kind: scaling_table(frame, kind) for kind in ("strong", "weak")}
    return records, scaling, headline(records, scaling)


def test_one_headline_row_per_strategy_at_its_largest_p(scenario):
    records, scaling, table = tables(scenario)
    rows = table.set_index("strategy")
    assert list(rows.index) == [
        "cellular / bce / mpi",
        "data_parallel / bce / horovod",
        "data_parallel / bce / torch",
        "label_partitioned / bce / mpi",
    ]
    dp = rows.loc["data_parallel / bce / horovod"]
    assert dp["P"] == "1,2" and dp["train_s"] == 55.0 and dp["speedup"] == pytest.approx(100 / 55)
    assert dp["efficiency"] == pytest.approx(100 / 55 / 2) and dp["time_to_target"] == "40.0 s" and dp["fid"] == 45.0
    assert dp["quality"] == "classifier:digits, n=500"
    assert rows.loc["cellular / bce / mpi", "time_to_target"] == "not reached (best 1.19e+03)"


def test_checks_state_the_equivalences_verified(scenario):
    _, _, table = tables(scenario)
    checks = table.set_index("strategy")["checks"]
    assert checks["label_partitioned / bce / mpi"] == "replicas identical; same model on P=1,2"
    assert "MODEL DIFFERS across P=1,2" in checks["cellular / bce / mpi"]  # a placement-invariant strategy that drifted
    assert "same model on" not in checks["data_parallel / bce / horovod"]  # data-parallel sums in another order
    assert "same model as torch at P=2" in checks["data_parallel / bce / horovod"]


def test_findings_name_the_winner_with_its_caveats(scenario):
    records, scaling, table = tables(scenario)
    sentences = findings(table, records, scaling)
    assert (
        sentences[0]
        == "Fastest to FID <= 50 (classifier:digits, n=500): label_partitioned / bce / mpi in 35.0 s of training at P=2."
    )
    assert sentences[1].startswith("Best final quality: label_partitioned / bce / mpi at P=2, FID 30, KID 0.04")
    assert sentences[2].startswith("Best strong-scaling efficiency at P=2: label_partitioned / bce / mpi, E = 1.00")


def test_caveats_and_not_learned_warnings(scenario, tmp_path):
    records, scaling, table = tables(scenario)
    warnings = not_learned_warnings(records)
    assert len(warnings) == 2 and warnings[0].startswith("cel-p1 has not learned: IS 1.010 is within 5 % of 1; pixel std 0.010")
    assert "FID 1190.0 is no better than the untrained generator's 1200.0" in warnings[0]
    text = write_report(scenario, tmp_path / "report").read_text()
    head = text.split("## Headline")[1].split("## ")[0]
    assert "**Warnings:**" in head and "- cel-p2 has not learned" in head
    assert not_learned(learned()) == []


def test_a_caveat_follows_a_finding_about_an_oversubscribed_or_unlearned_model(tmp_path):
    root = tmp_path / "results"
    for r in (
        record("c-p1", strategy="cellular", engine="mpi", procs=1, train_s=90.0, quality=learned(30.0)),
        record(
            "c-p2",
            strategy="cellular",
            engine="mpi",
            procs=2,
            train_s=40.0,
            oversubscribed=True,
            quality={**learned(30.0), "pixel_std": 0.01},
        ),
    ):
        write_record(root / r["run_id"], r)
    records, scaling, table = tables(root)
    text = " ".join(findings(table, records, scaling))
    assert "Caveat: its P=2 runs oversubscribe the cores, its model did not learn (pixel std 0.010 is near 0" in text
