"""Fidelity and diversity per system, collapse as a named outcome, and the diversity family (suite.analysis.collapse,
suite.analysis.diversity, the report's first page and findings.csv)."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats
from test_findings import learned, seeded
from test_report import quality

from suite.analysis.collapse import collapse_rate, collapsed, threshold
from suite.analysis.report import write_report
from suite.records.results import iter_records, new_record, write_record
from suite.records.scored import Quality


def prdc(coverage: float, precision: float = 0.9, k: int = 5, n: int = 500) -> dict:
    """The manifold fields of a quality block."""
    return {"precision": precision, "recall": coverage, "density": 1.0, "coverage": coverage, "prdc_k": k, "prdc_n_real": n}


def scored(coverage: float | None, **extra) -> Quality:
    block = {**quality(), **(prdc(coverage) if coverage is not None else {}), **extra}
    return Quality(**{k: v for k, v in block.items() if k in Quality.__dataclass_fields__ and k != "per_class_predicted"})


def one(quality_block: Quality | None):
    """A stand-in record: only its quality is read."""
    return type("R", (), {"quality": quality_block})()


def test_collapsed_is_coverage_at_most_four_balls_worth_of_real_samples():
    assert threshold(scored(0.5)) == pytest.approx(0.04)  # 4 * 5 / 500
    assert threshold(scored(0.5, prdc_n_real=250)) == pytest.approx(0.08)  # fewer samples: one image covers more
    assert threshold(scored(0.5, prdc_n_real=10_000)) == pytest.approx(0.02)  # never below the floor
    assert collapsed(one(scored(0.018))) is True  # one image, as reports/collapse/threshold.md measured it
    assert collapsed(one(scored(0.098))) is False  # one class of ten
    assert collapsed(one(scored(0.04))) is True and collapsed(one(scored(0.0401))) is False


def test_samples_all_alike_are_collapsed_and_unscored_or_old_records_are_unknown():
    alike = scored(None, not_scorable="the samples are constant (pixel std 1e-06 across samples)")
    assert collapsed(one(alike)) is True
    assert collapsed(one(scored(None, not_scorable="3 of 500 samples are not finite (NaN or inf)"))) is None
    assert collapsed(one(scored(None))) is None  # a record written before coverage
    assert collapsed(one(None)) is None


def test_the_collapse_rate_has_its_wilson_interval_and_counts_only_runs_it_can_tell():
    runs = [one(scored(c)) for c in (0.0, 0.5, 0.6, 0.7)] + [one(scored(None))]
    rate = collapse_rate(runs)
    assert rate is not None and (rate.collapsed, rate.told) == (1, 4) and not rate.every
    wilson = stats.binomtest(1, 4).proportion_ci(method="wilson")
    assert (rate.lo, rate.hi) == pytest.approx((wilson.low, wilson.high))
    assert rate.text().startswith("1 of 4 (0.25 [")
    assert collapse_rate([one(scored(0.0)), one(scored(0.001))]).every
    assert collapse_rate([one(scored(None))]) is None


@pytest.fixture
def report(tmp_path):
    """Three systems: a diverse one, a less diverse one that collapsed in one seed of four, one collapsed in all."""
    root = tmp_path / "results"
    runs = [
        *seeded("dp", [40, 42, 41, 43], seeds=range(4), quality=None),
        *seeded("lp", [45, 44, 46, 47], seeds=range(4), strategy="label_partitioned", engine="mpi", quality=None),
        *seeded("cel", [1200] * 4, seeds=range(4), strategy="cellular", engine="mpi", quality=None),
    ]
    coverage = {"dp": [0.80, 0.82, 0.78, 0.81], "lp": [0.40, 0.45, 0.01, 0.42], "cel": [0.0, 0.004, 0.0, 0.012]}
    for r in runs:
        stem, seed = r["run_id"].rsplit("-s", 1)
        r["quality"] = learned(r["time_to_target"]["best"], ruler_sha256="ab" * 32, **prdc(coverage[stem][int(seed)]))
        write_record(root / r["run_id"], new_record(r))
    out = tmp_path / "report"
    write_report(root, out)
    return out, list(iter_records(root))


def test_the_first_page_shows_fidelity_and_diversity_with_intervals_and_collapse_rates(report):
    out, _ = report
    page = (out / "report.md").read_text()
    section = page.split("## Fidelity and diversity", 1)[1].split("\n## ", 1)[0]
    table = pd.read_csv(out / "fidelity_diversity.csv").set_index("system")
    scores = ("precision", "density", "recall", "coverage")
    assert {"seeds", *scores, "collapsed", "collapse_told", "collapse_rate"} <= set(table.columns)
    assert all(pd.api.types.is_numeric_dtype(table[c]) for c in table.columns)  # numbers only, no text in the CSV
    dp = next(name for name in table.index if name.startswith("data_parallel"))
    lp = next(name for name in table.index if name.startswith("label_partitioned"))
    cel = next(name for name in table.index if name.startswith("cellular"))
    assert round(table.loc[dp, "coverage"], 3) == 0.803 and table.loc[dp, "seeds"] == 4
    assert table.loc[dp, "coverage_lo"] < table.loc[dp, "coverage"] < table.loc[dp, "coverage_hi"]
    assert (table.loc[lp, "collapsed"], table.loc[lp, "collapse_told"], table.loc[lp, "collapse_rate"]) == (1, 4, 0.25)
    assert (table.loc[cel, "collapsed"], table.loc[cel, "collapse_told"]) == (4, 4)
    assert dp in section and "Wilson" in section
    page_row = next(line for line in section.splitlines() if line.startswith(f"| {dp} |"))
    assert "| 4 | " in page_row and "0.803 [" in page_row and "(n=" not in page_row
    assert next(line for line in section.splitlines() if line.startswith(f"| {lp} |")).endswith("| 1 of 4 (0.25 [0.05, 0.70]) |")


def test_the_diversity_family_lands_in_findings_and_never_tests_a_system_collapsed_in_every_seed(report):
    out, _ = report
    found = pd.read_csv(out / "findings.csv")
    coverage = found[found["family"] == "coverage"]
    assert len(coverage) == 1  # data-parallel against label-partitioned; cellular not tested
    pair = coverage.iloc[0]
    assert pair["system_a"].startswith("data_parallel") and pair["system_b"].startswith("label_partitioned")
    assert pair["verdict"] in ("a better", "undecided") and (pair["seeds_a"], pair["seeds_b"]) == (4, 4)
    page = (out / "report.md").read_text()
    assert "Collapsed in every seed, not tested: cellular" in page
    assert "Diversity (coverage of the end-of-budget model" in page
