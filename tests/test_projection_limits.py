"""What the projection will not do: extrapolate a scaling law from one process count, or a step of a size its fit
never identified; and what it always does: say each model's held-out error beside its projected figures, on a
current machine by default."""

import pandas as pd
import pytest
from test_project import NET, gan_record, synthetic_records

from suite.analysis.projection.fit import fit_all, project
from suite.analysis.projection.render import heldout_errors, run_projection, write_projection
from suite.analysis.projection.validation import validate
from suite.analysis.projection_defaults import DEFAULT_NETWORK
from suite.analysis.report import DEFAULT_BASELINES
from suite.measure.network import PRESETS


def _one_count():
    """A data-parallel sweep at P = 2 only (two seeds), beside the synthetic sweeps of every strategy."""
    lonely = [gan_record(f"one-p2-s{s}", 2, 32, strategy="conditional") for s in (0, 1)]
    return synthetic_records() + lonely


def test_a_model_fitted_on_one_process_count_is_not_projected():
    records = _one_count()
    fitted = {f.key[0]: f for f in fit_all(records)}
    assert fitted["conditional"].procs == (2,)
    assert fitted["conditional"].refused.startswith("not projected: fitted on one process count (P=2)")
    assert fitted["data_parallel"].refused == ""
    table = project(list(fitted.values()), NET, [1, 2, 32])
    assert "conditional" not in set(table["strategy"]) and "data_parallel" in set(table["strategy"])


def test_a_step_of_a_size_the_fit_never_saw_is_not_extrapolated():
    weak = [r for r in synthetic_records() if r.run_id in ("dpw-p1", "dpw-p2")]  # one per-rank batch: 48 images
    (fitted,) = fit_all(weak)
    assert fitted.procs == (1, 2) and fitted.refused == ""
    table = project([fitted], NET, [1, 4]).set_index(["scaling", "procs"])
    assert table.loc[("weak", 4), "time_s"] > 0  # the same step on more ranks: predicted
    strong = table.loc[("strong", 4)]  # the batch split over 4 ranks: a step the fit never saw
    assert pd.isna(strong["time_s"]) and "not extrapolated: the fit saw one batch size (48 images" in strong["note"]


def test_every_projected_figure_carries_its_models_held_out_error(tmp_path):
    records = _one_count()
    result = run_projection(records, NET, NET, [1, 2, 32], DEFAULT_BASELINES)
    assert result is not None
    errors = heldout_errors(validate(records, NET))
    runs, median, worst = errors["data_parallel / bce / mpi (digits 20px, 1 thread, cpu)"]
    assert runs == 5 and median < 0.01 and abs(worst) >= median  # dp-p1, p2, p4 and the weak dpw-p1, p2
    dp = result.table[result.table["strategy"] == "data_parallel"]
    assert (dp["heldout_runs"] == runs).all() and dp["heldout_median_abs_error"].tolist() == pytest.approx([median] * len(dp))
    assert result.comparison["heldout_runs"].notna().all()  # the papers' points are beside projected figures too
    text = "\n".join(write_projection(result, tmp_path))
    strong = text.split("## Strong scaling, projected speedup\n")[1].split("\n#")[0]
    first_row = next(line for line in strong.splitlines() if line.startswith("| held-out error |"))
    assert f"median abs. error {median:.0%}, worst {worst:+.0%} (5 runs)" in first_row
    assert "conditional / bce / mpi (digits 20px, 1 thread, cpu): not projected: fitted on one process count" in text
    assert "conditional" not in strong


def test_the_default_target_is_a_current_machine_and_summit_stays_by_name():
    assert DEFAULT_NETWORK in ("perlmutter", "frontier")
    assert "summit" in PRESETS and DEFAULT_NETWORK in PRESETS
