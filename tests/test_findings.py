"""The report's first screen from synthetic records: headline rows, checks, findings, warnings."""

import dataclasses

import numpy as np
import pytest
from scipy import stats
from test_report import quality, record

from conftest import REPO
from suite.analysis import findings as analysis_findings
from suite.analysis.conditions import not_learned_warnings
from suite.analysis.headline import SHOWN_COLUMNS, headline_rows, shown_table
from suite.analysis.report import write_report
from suite.analysis.report.scaling_tables import scaling_table
from suite.analysis.stats.pair_tests import TEST, TESTS
from suite.analysis.systems import ruler_text, strong_speedup
from suite.measure.metrics.signals import not_learned
from suite.records.results import load_records, new_record, write_record
from suite.records.scored import Quality


def findings(rows, records, scaling):
    """The findings' sentences."""
    return [finding.text for finding in analysis_findings.tested_findings(rows, records, scaling)]


def learned(fid=40.0, **extra):
    return {**quality(fid=fid), "ema_fid": fid, "ema_n": 500, "pixel_std": 0.4, "untrained_fid": 1200.0, **extra}


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


def seeded(stem, fids, clocks=None, train_s=None, seeds=(0, 1, 2), **common):
    """One record per seed: FID and time to target (None: not reached) per seed."""
    out = []
    for i, seed in enumerate(seeds):
        clock = clocks[i] if clocks else None
        fid = fids[i]
        extra = dict(common)
        if "quality" not in extra:
            extra["quality"] = learned(fid, ruler_sha256="ab" * 32)
        out.append(
            record(
                f"{stem}-s{seed}",
                seed=seed,
                train_s=train_s[i] if train_s else 10.0,
                time_to_target=target(clock is not None, clock, best=fid),
                **extra,
            )
        )
    return out


@pytest.fixture
def scenario(tmp_path):
    root = tmp_path / "results"
    lp = dict(strategy="label_partitioned", engine="mpi", classes=list(range(10)), replicas_identical=True)
    unlearned = {**quality(fid=1190.0, is_mean=1.01), "pixel_std": 0.01, "untrained_fid": 1200.0, "ruler_sha256": "ab" * 32}
    runs = [
        *seeded("dp-p1", [60, 61, 59], train_s=[100, 101, 99], procs=1, replicas_identical=True, model_digest="a"),
        *seeded("dp-p2", [45, 46, 44], [36, 40, 34], train_s=[55, 56, 54], procs=2, replicas_identical=True, model_digest="b"),
        *seeded("dpt-p2", [46, 47, 45], [44, 45, 43], engine="torch", procs=2, replicas_identical=True, model_digest="b"),
        *[
            {**r, "model_digest": f"c{r['seed']}"}
            for r in seeded("lp-p1", [30, 31, 29], [70, 71, 69], train_s=[80, 80, 80], procs=1, **lp)
        ],
        *[
            {**r, "model_digest": f"c{r['seed']}"}
            for r in seeded("lp-p2", [30, 31, 29], [35, 36, 34], train_s=[40, 41, 39], procs=2, **lp)
        ],
        *seeded("cel-p1", [1190] * 3, strategy="cellular", engine="mpi", procs=1, model_digest="d", quality=unlearned),
        *seeded(
            "cel-p2",
            [1190] * 3,
            strategy="cellular",
            engine="mpi",
            procs=2,
            model_digest="e",
            oversubscribed=True,
            quality=unlearned,
        ),
    ]
    for r in runs:
        write_record(root / r["run_id"], new_record(r))
    return root


def tables(root):
    frame = load_records(root)
    records = [r for r in (__import__("suite.records.results", fromlist=["iter_records"]).iter_records(root))]
    scaling = {kind: scaling_table(frame, kind) for kind in ("strong", "weak")}
    return records, scaling, headline_rows(records, scaling)


def by_config(rows):
    """The headline rows by their configuration's name."""
    return {row.config: row for row in rows}


def test_the_headline_table_shows_the_rows_shown_fields_and_nothing_else(scenario):
    """The headline page's table (:func:`shown_table`) is made from the typed rows at the output: one row per row, the
    shown fields under their columns (the configuration under ``strategy``), none of the summaries or runs."""
    _, _, rows = tables(scenario)
    shown = shown_table(rows)
    assert list(shown.columns) == list(SHOWN_COLUMNS.values()) and list(shown.columns[:2]) == ["strategy", "P"]
    assert list(shown["strategy"]) == [row.config for row in rows] and len(rows) == 4
    assert not {"main", "fid_summary", "_fid", "_main"} & set(shown.columns)


def test_one_headline_row_per_strategy_at_its_largest_p_over_its_seeds(scenario):
    records, scaling, table = tables(scenario)
    rows = by_config(table)
    assert list(rows) == [
        "cellular / bce / mpi",
        "data_parallel / bce / horovod",
        "data_parallel / bce / torch",
        "label_partitioned / bce / mpi",
    ]
    dp = rows["data_parallel / bce / horovod"]
    assert dp.procs_text == "1,2" and dp.seeds == 3
    # speedup: geometric mean of the P=1 times over the P=2 times', with both ends' spread; efficiency S/2
    assert dp.speedup_summary.center == pytest.approx(stats.gmean([100, 101, 99]) / stats.gmean([55, 56, 54]))
    assert dp.speedup == dp.speedup_summary.text() and dp.speedup.endswith("(n=3 at P=1, 3 at P=2)")
    assert dp.efficiency == dp.speedup_summary.scaled(1 / 2).text()
    # geometric mean [95 % Student-t interval of the mean log, exponentiated] (n)
    logs = np.log([45.0, 46.0, 44.0])
    half = stats.t.ppf(0.975, 2) * stats.sem(logs)
    center = np.exp(logs.mean())
    assert dp.fid == f"{center:.3g} [{np.exp(logs.mean() - half):.3g}, {np.exp(logs.mean() + half):.3g}] (n=3)"
    assert dp.time_to_target.endswith("(n=3) s") and dp.time_to_target.startswith(f"{stats.gmean([36, 40, 34]):.3g} [")
    assert dp.quality == "classifier:digits abababababab, n=500"
    assert rows["cellular / bce / mpi"].time_to_target == "reached by 0 of 3 draws (best 1190 [1190, 1190] (n=3))"


def test_checks_state_the_equivalences_verified_seed_by_seed(scenario):
    _, _, table = tables(scenario)
    checks = {name: row.checks for name, row in by_config(table).items()}
    # one model per seed, the same on P=1 and P=2 for each seed
    assert checks["label_partitioned / bce / mpi"] == "replicas identical; same model on P=1,2"
    assert "MODEL DIFFERS across P=1,2" in checks["cellular / bce / mpi"]  # a placement-invariant strategy that drifted
    assert "same model on" not in checks["data_parallel / bce / horovod"]  # data-parallel sums in another order
    assert "same model as torch at P=2" in checks["data_parallel / bce / horovod"]


def test_findings_claim_only_the_pairs_their_tests_found_different(scenario):
    records, scaling, table = tables(scenario)
    sentences = findings(table, records, scaling)
    # times to target 35 +- 1 s, 36.7 +- 3 s and 44 +- 1 s over 3 seeds: all three pairs tested together
    assert sentences[0].startswith(
        "Time to FID <= 50 (classifier:digits, n=500), seconds of training: label_partitioned / bce / mpi 35 ["
    )
    assert (
        f"Tested: all 3 pairs of the 3 candidates as one family, {TESTS[TEST].words} on log values, Holm-corrected at 5 %"
        in sentences[0]
    )
    assert "Not in every draw: cellular / bce / mpi (reached by 0 of 3 draws" in sentences[0]
    # only the configuration that missed is named there: those that reached it in every draw are not
    assert sentences[0].split("Not in every draw: ")[1].count(" / bce / ") == 1
    # FID 30 +- 1 against 45 +- 1 and 46 +- 1: significant against both; the two data-parallel engines are not distinguishable
    assert sentences[1].startswith(
        "Quality (end-of-budget FID, classifier:digits abababababab, n=500): label_partitioned / bce / mpi 30 ["
    )
    assert (
        "label_partitioned / bce / mpi is significantly better than data_parallel / bce / horovod (p = " in sentences[1]
        and "and data_parallel / bce / torch (p = " in sentences[1]
    )
    assert "The other tested pair is not distinguishable." in sentences[1]
    assert "data_parallel / bce / horovod is significantly" not in sentences[1]
    assert sentences[2].startswith("Left out of the quality comparisons, not learned (the final model's signals") and sentences[
        2
    ].endswith("untrained generator's): cellular / bce / mpi.")
    # speedups 2.0 (lp) against 1.8 (dp), 3 runs at each end
    assert sentences[3].startswith("Strong-scaling speedup at P=2: label_partitioned / bce / mpi 2 [")
    assert "label_partitioned / bce / mpi is significantly better than data_parallel / bce / horovod (p = " in sentences[3]


def test_one_draw_is_never_a_verdict(tmp_path):
    root = tmp_path / "results"
    for r in (
        record("a", quality=learned(30.0), time_to_target=target(True, 10.0)),
        record("b", strategy="conditional", quality=learned(60.0), time_to_target=target(True, 20.0)),
    ):
        write_record(root / r["run_id"], new_record(r))
    records, scaling, table = tables(root)
    text = " ".join(findings(table, records, scaling))
    assert "significantly better" not in text
    assert (
        "data_parallel / bce / horovod 30 (n=1), conditional / bce / horovod 60 (n=1) (best estimate first). "
        "No pair can be tested (one draw at an end, or no spread)."
    ) in text


def same_distribution(tmp_path, seed):
    """Four configurations whose per-seed FIDs, times to target and P=1/P=2 times are drawn from one distribution each."""
    rng = np.random.default_rng(seed)
    root = tmp_path / "results"
    configs = [("data_parallel", "horovod"), ("conditional", "horovod"), ("label_partitioned", "mpi"), ("cellular", "mpi")]
    for strategy, engine in configs:
        fids, clocks, t2 = (rng.lognormal(np.log(m), 0.1, 3).tolist() for m in (50.0, 20.0, 30.0))
        t1 = rng.lognormal(np.log(54.0), 0.1, 3).tolist()
        runs = seeded(f"{strategy}-p2", fids, clocks, train_s=t2, strategy=strategy, engine=engine, procs=2)
        runs += seeded(f"{strategy}-p1", fids, clocks, train_s=t1, strategy=strategy, engine=engine, procs=1)
        for r in runs:
            write_record(root / r["run_id"], new_record(r))
    return root


def test_a_report_in_which_every_candidate_has_the_same_distribution_claims_nothing(tmp_path):
    records, scaling, table = tables(same_distribution(tmp_path, seed=3))
    sentences = findings(table, records, scaling)
    assert len(sentences) == 3  # time to target, final quality, speedup
    assert all("No pair differs significantly." in s for s in sentences)
    assert not any("significantly better" in s for s in sentences)
    assert all("Tested: all 6 pairs of the 4 candidates as one family" in s for s in sentences)
    assert len({row.fid for row in table}) == 4  # the estimates differ; no test finds it


def test_a_tie_with_both_never_becomes_b_beats_c(tmp_path):
    """A beats C; B, with a wide spread, ties with both: no sentence says B beats C, nor A beats B."""
    root = tmp_path / "results"
    for stem, strategy, fids in (
        ("a", "data_parallel", [30.0, 31.0, 29.0]),
        ("b", "conditional", [25.0, 45.0, 80.0]),
        ("c", "label_partitioned", [90.0, 95.0, 86.0]),
    ):
        for r in seeded(stem, fids, strategy=strategy, procs=2):
            write_record(root / r["run_id"], new_record(r))
    records, scaling, table = tables(root)
    quality = next(s for s in findings(table, records, scaling) if s.startswith("Quality (end-of-budget FID"))
    assert "data_parallel / bce / horovod is significantly better than label_partitioned / bce / horovod (p = " in quality
    assert "conditional / bce / horovod is significantly" not in quality
    assert "better than conditional" not in quality
    assert "The other 2 tested pairs are not distinguishable." in quality


def test_fid_intervals_in_the_headline_never_go_below_zero(tmp_path):
    root = tmp_path / "results"
    for r in seeded("dp", [749.6, 327.2, 197.7], procs=2):  # reports/digits' widest per-seed FIDs
        write_record(root / r["run_id"], new_record(r))
    _, _, table = tables(root)
    summary = table[0].fid_summary
    assert summary.interval[0] > 0 and table[0].fid == summary.text()
    assert not table[0].fid.split("[")[1].startswith("-")


def test_the_speedup_interval_carries_the_p1_spread_and_the_scaling_table_prints_the_same(tmp_path):
    root = tmp_path / "results"
    t1, t2 = [100.0, 108.0, 94.0], [52.0, 55.0, 50.0]
    for r in [*seeded("dp-p1", [40.0] * 3, train_s=t1, procs=1), *seeded("dp-p2", [40.0] * 3, train_s=t2, procs=2)]:
        write_record(root / r["run_id"], new_record(r))
    records, scaling, table = tables(root)
    speedup = table[0].speedup_summary
    p2_alone = stats.t.interval(0.95, 2, loc=np.log(stats.gmean(t1) / np.array(t2)).mean(), scale=stats.sem(np.log(t2)))
    assert np.log(speedup.interval[0]) < p2_alone[0] and np.log(speedup.interval[1]) > p2_alone[1]
    strong = scaling["strong"].set_index("procs")
    assert strong.loc[2, "_speedup"].text() == table[0].speedup
    assert strong.loc[2, "_efficiency"].text() == table[0].efficiency
    assert (strong.loc[2, "speedup_lo"], strong.loc[2, "speedup_hi"]) == pytest.approx(speedup.interval)


def test_caveats_and_not_learned_warnings(scenario, tmp_path):
    records, scaling, table = tables(scenario)
    warnings = not_learned_warnings(records)
    assert len(warnings) == 6 and warnings[0].startswith(
        "cel-p1-s0 has not learned: IS 1.010 is within 5 % of 1; pixel std 0.010"
    )
    assert "FID 1190.0 is no better than the untrained generator's 1200.0" in warnings[0]
    text = write_report(scenario, tmp_path / "report").read_text()
    head = text.split("## Headline")[1].split("## ")[0]
    assert "**Warnings:**" in head and "- cel-p2-s0 has not learned" in head
    assert not_learned(new_record({"quality": learned()}).quality) == []


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
        write_record(root / r["run_id"], new_record(r))
    records, scaling, table = tables(root)
    text = " ".join(findings(table, records, scaling))
    assert (
        "Caveat for cellular / bce / mpi: its P=2 runs oversubscribe the cores, its model did not learn (pixel std 0.010 is near 0"
        in text
    )


def test_repeats_of_one_seed_count_once_and_never_make_a_verdict(tmp_path):
    root = tmp_path / "results"
    for r in (
        record("a-r0", quality=learned(30.0), repeat=0, seed=0),
        record("a-r1", quality=learned(30.0), repeat=1, seed=0),
        record("b-r0", strategy="conditional", quality=learned(60.0), repeat=0, seed=0),
        record("b-r1", strategy="conditional", quality=learned(60.0), repeat=1, seed=0),
    ):
        write_record(root / r["run_id"], new_record(r))
    records, scaling, table = tables(root)
    dp = by_config(table)["data_parallel / bce / horovod"]
    assert dp.fid == "30 (n=1)"  # one seed, however often it ran
    assert dp.train_s.endswith("(n=2)")  # timing varies by repeat
    text = " ".join(findings(table, records, scaling))
    assert "significantly" not in text and "No pair can be tested (one draw at an end, or no spread)." in text


def test_time_budgeted_speedup_is_the_ratio_of_throughput():
    runs = [
        new_record(record("p1", procs=1, train_s=30.0, budget_s=30.0, images_per_s=100.0)),
        new_record(record("p2-a", procs=2, train_s=30.0, budget_s=30.0, images_per_s=190.0)),
        new_record(record("p2-b", procs=2, train_s=30.0, budget_s=30.0, images_per_s=194.0)),
    ]
    speedup = strong_speedup(runs, 2)
    assert speedup.center == pytest.approx(stats.gmean([190.0, 194.0]) / 100.0)
    assert speedup.interval is None and speedup.text().endswith("(n=2 at P=2, 1 at P=1: no interval)")  # one P=1 run
    plain = [dataclasses.replace(r, budget_s=None) for r in runs]
    assert strong_speedup(plain, 2).center == pytest.approx(1.0)


def test_the_equal_budget_view_compares_at_equal_images_under_an_images_budget():
    def curve(points):  # (clock, images, fid) per point
        return [
            {"clock_s": c, "step": i, "images": n, "fid": f, "features": "classifier:digits", "n": 500}
            for i, (c, n, f) in enumerate(points)
        ]

    fast = curve([(5.0, 480, 100.0), (10.0, 960, 50.0)])  # a fast system: half its budget in 5 s
    slow = curve([(20.0, 480, 90.0), (40.0, 960, 40.0)])  # a slow one: in 20 s
    lp = dict(strategy="label_partitioned", engine="mpi", classes=list(range(10)))
    runs = [
        *[new_record({**r, "curve": fast}) for r in seeded("dp", [50, 50, 50], train_s=[10, 10, 10], budget_images=960)],
        *[new_record({**r, "curve": slow}) for r in seeded("lp", [40, 40, 40], train_s=[40, 40, 40], budget_images=960, **lp)],
    ]
    table = by_config(headline_rows(runs, {}))
    assert all(row.fid_at_equal_time.endswith("at 960 images") for row in table.values())  # both at their whole budget
    assert table["label_partitioned / bce / mpi"].fid_at_equal_time_summary.center == pytest.approx(40.0)
    assert table["data_parallel / bce / horovod"].fid_at_equal_time_summary.center == pytest.approx(50.0)
    # without an images budget the view holds the window's seconds equal: the slow system has no point by 10 s
    timed = by_config(headline_rows([dataclasses.replace(r, budget_images=None) for r in runs], {}))
    assert timed["data_parallel / bce / horovod"].fid_at_equal_time.endswith("at 10 s")
    assert timed["label_partitioned / bce / mpi"].fid_at_equal_time is None


def test_scores_of_another_protocol_are_under_another_ruler_text():
    q = {
        "features": "inception",
        "ruler_sha256": "6726825d" + "0" * 56,
        "n": 10000,
        "classes": list(range(10)),
        "num_classes": 10,
    }
    assert ruler_text(Quality(**q)) == ruler_text(Quality(**q, protocol="suite")) == "inception 6726825d0000, n=10000"
    assert ruler_text(Quality(**q, protocol="standard")) == "inception 6726825d0000, n=10000, protocol standard"


def test_analysis_carries_one_typed_table_from_the_records_to_findings_csv():
    """Issue 62: the records become one typed table once (:func:`headline_rows`, the one place a :class:`HeadlineRow`
    is made), and every stage after it takes the rows, never a frame: the findings, the first page, the headline page,
    ``headline.csv`` and the diversity section. So a record reaches ``findings.csv`` in three changes of form (record ->
    HeadlineRow -> Finding -> frame), where it took nine before (a headline frame in between, read back into rows five
    times)."""
    import ast
    import inspect

    from suite.analysis.findings_csv import findings_table
    from suite.analysis.report.diversity_view import fidelity_diversity_section
    from suite.analysis.report.headline_view import first_page_headline, full_headline, headline_csv

    made = []
    for path in sorted((REPO / "suite").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "HeadlineRow":
                made.append(str(path.relative_to(REPO)))
    assert made == ["suite/analysis/headline.py"]
    assert str(inspect.signature(headline_rows).return_annotation) == "list[HeadlineRow]"
    for stage in (
        analysis_findings.tested_findings,
        first_page_headline,
        full_headline,
        headline_csv,
        fidelity_diversity_section,
    ):
        assert str(next(iter(inspect.signature(stage).parameters.values())).annotation) == "list[HeadlineRow]", stage
    assert str(inspect.signature(analysis_findings.tested_findings).return_annotation) == "list[Finding]"
    assert str(next(iter(inspect.signature(findings_table).parameters.values())).annotation) == "list[Finding]"
