"""The report from synthetic records: known times give known speedups; missing numbers stay n/a."""

import math

import numpy as np
import pandas as pd
import pytest
from report_text import whole_report
from scipy import stats

from suite.analysis.markdown import markdown_table
from suite.analysis.report import write_report
from suite.analysis.report.scaling_tables import scaling_table
from suite.records.results import load_records, new_record, write_record


def record(
    run_id,
    strategy="data_parallel",
    engine="horovod",
    procs=1,
    train_s=10.0,
    scaling="strong",
    repeat=0,
    status="ok",
    quality=None,
    gpu=None,
    **extra,
):
    r = {
        "run_id": run_id,
        "status": status,
        "error": None if status == "ok" else "RuntimeError: boom",
        "scenario": "synthetic",
        "strategy": strategy,
        "engine": engine,
        "loss": "bce",
        "procs": procs,
        "scaling": scaling,
        "repeat": repeat,
        "grid": None,
        "label": None,
        "epochs": 1,
        "seed": 0,
        "dataset": {"name": "digits", "classes": list(range(10))},
        "train_s": train_s,
        "wall_s": train_s + 5,
        "images_per_s": 1000.0 * procs / (train_s / 10),
        "images_per_s_per_rank": 1000.0 / (train_s / 10),
        "global_batch": 64,
        "generator_steps": 20,
        "device": "cpu",
        "launcher": "openmpi",
        "threads_per_rank": 1,
        "cores_per_node": 8,
        "ranks_per_node": procs,
        "oversubscribed": procs > 8,
        "setup_s": 3.0,
        "warmup_s": 1.0,
        "finalize_s": 0.5,
        "score_s": 2.0,
        "comm": {"bytes": 2**20 * (procs - 1), "seconds": 0.1 * (procs - 1)},
        "telemetry": {
            "step_s": train_s / 20,
            "data_s": 0.001,
            "compute_s": train_s / 25,
            "comm_wait_s": 0.01,
            "step_p50": train_s / 20,
            "step_p95": train_s / 18,
            "step_ci95": train_s / 200,
            "work_images_per_rank": [1920] * procs,
            "work_steps_per_rank": [18] * procs,
            "flops_per_step": 10**10,
            "achieved_flops_per_rank": 5e10,
            "peak_flops_per_rank": 1e11,
            "peak_source": "measured",
            "fraction_of_peak": 0.5,
            "comm_share": 0.01 / (train_s / 20),
            "timed_steps": 18,
            "cpu_util_mean": 95.0,
            "host_mem_peak_mb": 900.0,
            "gpu_util_mean": gpu,
            "gpu_util_p95": gpu,
            "gpu_mem_used_mb": 2000.0 if gpu else None,
            "gpu_mem_peak_mb": 100.0 if gpu else None,
        },
        "env": {"python": "3.11.7", "torch": "2.13.0"},
        **extra,
    }
    if quality:
        r["quality"] = quality
    return r


def class_entry(n, metric, fid=None, kid=0.02, n_real=180):
    kid_fields = (
        {"kid_mean": kid, "kid_std": kid / 4, "kid_subset_size": n // 2, "kid_subsets": 100}
        if metric
        else {"kid_mean": None, "kid_std": None, "kid_subset_size": None, "kid_subsets": None}
    )
    note = {"fid": None, "kid": "FID withheld: ...; KID given instead", None: "not scored: fewer than 10 samples"}[metric]
    return {"n": n, "n_real": n_real, "metric": metric, "fid": fid, **kid_fields, "note": note}


def quality(features="classifier:digits", fid=50.0, is_mean=3.0, labelled=False, n=500, classes=None, num_classes=10):
    per_class = {
        "0": class_entry(300, "fid", fid=51.0, kid=0.05),
        "1": class_entry(60, "kid", kid=0.03),
        "2": class_entry(5, None),
    }
    return {
        "features": features,
        "features_detail": f"{features} detail",
        "feature_dim": 128,
        "n": n,
        "n_real": n,
        "classes": classes or list(range(num_classes)),
        "num_classes": num_classes,
        "is_mean": is_mean,
        "is_std": 0.1 if is_mean is not None else None,
        "is_splits": 10 if is_mean is not None else None,
        "is_split_n": n // 10 if is_mean is not None else None,
        "is_note": None if is_mean is not None else "no logits",
        "fid": fid,
        "fid_note": None
        if fid is not None
        else "FID withheld: 500 generated and 500 real samples are not both above the 2048 feature dimensions",
        "kid_mean": 0.04,
        "kid_std": 0.002,
        "kid_subset_size": n // 2,
        "kid_subsets": 100,
        "per_class_label": per_class if labelled else None,
        "per_class_predicted": None if labelled else per_class,
        "tvd": 0.2,
        "label_acc": 0.9 if labelled else None,
        "classifier_accuracy": 0.99,
    }


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "results"
    runs = [
        # strong scaling with two repeats: T(1) = 101, T(2) = 51, T(4) = 30
        record("dp-p1-r0", procs=1, train_s=100.0),
        record("dp-p1-r1", procs=1, train_s=102.0, repeat=1),
        record("dp-p2-r0", procs=2, train_s=50.0),
        record("dp-p2-r1", procs=2, train_s=52.0, repeat=1),
        record("dp-p4-r0", procs=4, train_s=30.0, quality=quality()),
        # weak scaling: T(1) = 10, T(2) = 11, T(4) = 12.5
        record("lp-p1", strategy="label_partitioned", engine="mpi", procs=1, train_s=10.0, scaling="weak"),
        record("lp-p2", strategy="label_partitioned", engine="mpi", procs=2, train_s=11.0, scaling="weak"),
        record(
            "lp-p4",
            strategy="label_partitioned",
            engine="mpi",
            procs=4,
            train_s=12.5,
            scaling="weak",
            quality=quality(fid=60.0, labelled=True),
        ),
        # a sweep without its P=1 run, and a failed run
        record("t-p2", engine="torch", procs=2, train_s=20.0),
        record(
            "t-p4",
            engine="torch",
            procs=4,
            train_s=12.0,
            quality=quality(features="inception(fid-trunk)", fid=None, is_mean=None),
        ),
        record("t-p8", engine="torch", procs=8, status="failed"),
    ]
    for r in runs:
        write_record(root / r["run_id"], new_record(r))
    return root


def test_strong_scaling_speedup_and_efficiency_from_known_times(results):
    table = scaling_table(load_records(results), "strong")
    dp = table[table["config"] == "data_parallel / bce / horovod"].set_index("procs")
    assert dp.loc[1, "train_s_mean"] == pytest.approx(101.0) and dp.loc[1, "runs"] == 2
    t1 = math.sqrt(100 * 102)  # T(1) and T(2): geometric means over the runs
    assert dp.loc[2, "speedup"] == pytest.approx(t1 / math.sqrt(50 * 52)) and dp.loc[2, "efficiency"] == pytest.approx(
        t1 / math.sqrt(50 * 52) / 2
    )
    assert dp.loc[4, "speedup"] == pytest.approx(t1 / 30) and dp.loc[4, "efficiency"] == pytest.approx(t1 / 30 / 4)
    assert dp.loc[1, "speedup"] == pytest.approx(1.0) and dp.loc[1, "efficiency"] == pytest.approx(1.0)
    assert dp.loc[2, "train_s_std"] == pytest.approx(math.sqrt(2.0))  # sample std of 50 and 52
    # the interval of a ratio: both ends' spread of the log times, at the fewest degrees of freedom of either end
    v1, v2 = np.var(np.log([100, 102]), ddof=1) / 2, np.var(np.log([50, 52]), ddof=1) / 2
    half = stats.t.ppf(0.975, 1) * math.sqrt(v1 + v2)
    assert (dp.loc[2, "speedup_lo"], dp.loc[2, "speedup_hi"]) == pytest.approx(
        (dp.loc[2, "speedup"] * math.exp(-half), dp.loc[2, "speedup"] * math.exp(half))
    )
    assert dp.loc[2, "_speedup"].text().endswith("(n=2 at P=1, 2 at P=2)")
    # one run at P=4: its spread is unknown, so is the interval's
    assert pd.isna(dp.loc[4, "speedup_lo"]) and dp.loc[4, "_speedup"].text().endswith("(n=2 at P=1, 1 at P=4: no interval)")


def test_weak_scaling_efficiency_from_known_times(results):
    table = scaling_table(load_records(results), "weak").set_index("procs")
    assert table.loc[2, "efficiency"] == pytest.approx(10 / 11) and table.loc[4, "efficiency"] == pytest.approx(10 / 12.5)
    assert table["speedup"].isna().all()  # speedup is not defined for weak scaling
    # where the efficiency went: computation per image grew with the window (compute_s = train_s / 25), the
    # same images per step; the communication share is each point's own
    assert table.loc[1, "compute_slowdown"] == pytest.approx(1.0)
    assert table.loc[2, "compute_slowdown"] == pytest.approx(1.1) and table.loc[4, "compute_slowdown"] == pytest.approx(1.25)
    assert table.loc[4, "comm_share"] == pytest.approx(0.01 / (12.5 / 20))


def test_compute_slowdown_counts_the_images_of_a_step(tmp_path):
    """Strong scaling halves each rank's images per step: equal compute seconds per step are twice the time per image."""
    root = tmp_path / "halved"
    for procs in (1, 2):
        r = record(f"dp-p{procs}", procs=procs, train_s=100.0 / procs)
        r["telemetry"].update(compute_s=1.0, work_images_per_rank=[960 // procs] * procs, work_steps_per_rank=[10] * procs)
        write_record(root / r["run_id"], new_record(r))
    table = scaling_table(load_records(root), "strong").set_index("procs")
    assert table.loc[2, "compute_slowdown"] == pytest.approx(2.0) and table.loc[2, "efficiency"] == pytest.approx(1.0)


def test_a_sweep_without_p1_is_reported_as_such(results):
    table = scaling_table(load_records(results), "strong")
    torch_rows = table[table["config"] == "data_parallel / bce / torch"]
    assert list(torch_rows["procs"]) == [2, 4]  # the failed P=8 run is not in the scaling table
    assert torch_rows["speedup"].isna().all() and torch_rows["efficiency"].isna().all()
    assert (torch_rows["note"] == "no P=1 run: speedup and efficiency not computed").all()


def test_report_sections_csvs_and_plots(results, tmp_path):
    out = tmp_path / "report"
    first = write_report(results, out)
    text = whole_report(first)
    sections = [
        "## Headline",
        "## Details",
        "\n# Headline in full\n",
        "\n# Image quality\n",
        "\n# Scaling\n",
        "## Strong scaling",
        "## Weak scaling",
        "\n# Where the time goes\n",
        "<summary>Communication share</summary>",
        "**GPU utilization:**",
        "\n# Papers' numbers (not measured here)\n",
        "\n# Environment\n",
        "\n# Runs\n",
        "\n# Figures\n",
        "\n# Definitions\n",
    ]
    positions = [text.index(section) for section in sections]
    assert positions == sorted(positions)  # in this order: the first page, then the detail pages of its index
    # the figures sit on their pages (one folder down) and on the first page where they are key
    assert text.index("![strong_time.png](../strong_time.png)") < text.index("\n# Where the time goes\n")
    assert "![strong_time.png](strong_time.png)" in first.read_text()
    assert "- 1 run failed: see [Runs](details/runs.md)." in first.read_text()
    for name in (
        "runs",
        "strong_scaling",
        "weak_scaling",
        "speedup_efficiency",
        "communication",
        "gpu_utilization",
        "environment",
        "quality_classifier-digits",
        "quality_inception-fid-trunk",
    ):
        frame = pd.read_csv(out / f"{name}.csv")
        assert not frame.empty, name
    for name in ("strong_time.png", "strong_efficiency.png", "weak_time.png", "weak_efficiency.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the two feature networks get separate tables; the one without logits says why IS is missing
    assert "## Ruler `classifier:digits`" in text and "## Ruler `inception(fid-trunk)`" in text
    assert "IS n/a: no logits." in text
    assert "FID n/a for t-p4: FID withheld: 500 generated and 500 real samples are not both above the 2048" in text
    # the papers' numbers are printed as the paper's, in their own table
    assert "Paper 000, Inception Score" in text and "| mnist | DC-GAN | 2.54 | 0.54 | Table 5 |" in text
    assert "| t-p8 | failed |" in text and "**1 run(s) failed:** t-p8: RuntimeError: boom" in text
    assert "no P=1 run" in text
    assert "<details><summary>All 11 runs</summary>" in text  # per-run tables are folded


def test_cpu_only_runs_show_gpu_utilization_as_na(results, tmp_path):
    out = tmp_path / "report"
    text = whole_report(write_report(results, out))
    gpu = pd.read_csv(out / "gpu_utilization.csv")
    # the GPU columns, empty in every row of CPU runs, are left out of the CSV rather than written empty (issue 63)
    assert "gpu_util_mean" not in gpu.columns and "gpu_mem_peak_mb" not in gpu.columns and len(gpu) > 0
    assert "**GPU utilization:** all runs ran on CPUs (cpu): n/a, not measured and not estimated." in text
    assert "## GPU utilization" not in text  # one line, no table of n/a


def test_gpu_numbers_are_reported_when_measured(tmp_path):
    root = tmp_path / "results"
    write_record(root / "g", new_record(record("g", gpu=71.5)))
    text = whole_report(write_report(root, tmp_path / "report"))
    assert "| g | 1 | cpu | 71.5 | 71.5 | 2000 | 100 |" in text and "all runs ran on CPUs" not in text


def test_weak_scaling_reports_work_normalised_efficiency(results):
    table = scaling_table(load_records(results), "weak").set_index("procs")
    # per-rank throughput of the synthetic records is 1000 / (T / 10): E_work = T(1) / T(P) as well here
    assert table.loc[2, "efficiency_work"] == pytest.approx(10 / 11)
    assert table.loc[1, "work_images_per_rank"] == 1920 and table.loc[2, "threads_per_rank"] == "1"


def test_sweep_warnings(tmp_path):
    root = tmp_path / "results"
    runs = [
        record("a-p1", procs=1, threads_per_rank=2),
        record("a-p2", procs=2),  # threads differ across the sweep
        record("b-p1", engine="mpi", procs=1),
        record("b-p16", engine="mpi", procs=16, ranks_per_node=16),
        record("c-p1", strategy="label_partitioned", engine="mpi", procs=1, scaling="weak"),
        record("c-p2", strategy="label_partitioned", engine="mpi", procs=2, scaling="weak"),
        record("d-p1", strategy="cellular", engine="mpi", procs=1, scaling="weak", cells_per_rank=1, neighbourhood_size=1),
        record("d-p2", strategy="cellular", engine="mpi", procs=2, scaling="weak", cells_per_rank=1, neighbourhood_size=2),
        record("e-p1", strategy="cellular", engine="torch", procs=1, scaling="weak", cells_per_rank=9, neighbourhood_size=5),
        record("e-p2", strategy="cellular", engine="torch", procs=2, scaling="weak", cells_per_rank=9, neighbourhood_size=5),
    ]
    runs[5]["telemetry"]["work_images_per_rank"] = [1800, 2100]  # unequal class sizes
    for r in runs:
        write_record(root / r["run_id"], new_record(r))
    text = whole_report(write_report(root, tmp_path / "report"))
    warnings = text.split("**Warnings:**")[1].split("##")[0]
    assert "data_parallel / bce / horovod (strong): threads per rank differ across the sweep (1, 2)" in warnings
    assert "data_parallel / bce / mpi (strong) at P=16: 16 ranks x 1 threads on 8 cores is oversubscribed" in warnings
    assert "label_partitioned / bce / mpi (weak): the work per rank is not fixed (P=1: 1920, P=2: 1950" in warnings
    assert "cellular / bce / mpi / 1 cell per rank (weak): the neighbourhood grows with the grid (1 -> 2 cells)" in warnings
    assert "9 cells per rank" not in warnings  # a fixed 3x3 block per rank: nothing to warn about
    assert "threads per rank differ" not in warnings.split("data_parallel / bce / horovod")[0]


def test_markdown_table_escapes_and_formats():
    table = markdown_table(pd.DataFrame({"a": ["x|y", None], "b": [0.000012345, 1234.5678], "c": [True, 3]}))
    assert table.splitlines()[0] == "| a | b | c |"
    assert "x\\|y" in table and "1.23e-05" in table and "1235" in table and "n/a" in table and "yes" in table


def test_quality_tables_put_kid_and_n_beside_every_fid_and_keep_the_bases_apart(results, tmp_path):
    out = tmp_path / "report"
    text = whole_report(write_report(results, out))
    section = text.split("\n# Image quality\n")[1].split("\n# Papers")[0]
    header = next(line for line in section.splitlines() if line.startswith("| run_id"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[columns.index("fid") - 4 : columns.index("fid") + 3] == [
        "n",
        "n_real",
        "IS",
        "IS std (splits×n)",
        "fid",
        "KID",
        "KID std (subsets×n)",
    ]
    assert "per-class KID by generated label" in columns and "per-class KID by predicted class (biased low)" in columns
    # the unconditional run's per-class KID is under "predicted", the label-partitioned run's under "generated label"
    assert (
        "| dp-p4-r0 | 4 | 0 | 0-9 of 10 | 500 | 500 | 3 | 0.1 (10×50) | 50 | 0.04 | 0.002 (100×250) | n/a | 0.04 (2/3 classes, n 5-300) |"
        in section
    )
    assert (
        "| lp-p4 | 4 | 0 | 0-9 of 10 | 500 | 500 | 3 | 0.1 (10×50) | 60 | 0.04 | 0.002 (100×250) | 0.04 (2/3 classes, n 5-300) | n/a |"
        in section
    )
    scores = pd.read_csv(out / "quality_classifier-digits.csv")
    assert {"n", "n_real", "fid", "kid_mean", "kid_std", "kid_subset_size", "kid_subsets", "is_splits", "is_split_n"} <= set(
        scores
    )
    # one table (and CSV) per basis, each holding only its own runs
    by_label = pd.read_csv(out / "per_class_label_classifier-digits.csv")
    by_prediction = pd.read_csv(out / "per_class_predicted_classifier-digits.csv")
    assert set(by_label["run_id"]) == {"lp-p4"} and set(by_prediction["run_id"]) == {"dp-p4-r0"}
    per_class = section.split("\n# Per-class scores\n")[1]
    assert "## Ruler `classifier:digits`, by generated label" in per_class
    assert "## Ruler `classifier:digits`, by predicted class (biased low)" in per_class
    # per class: the sound metric named, with its n and n_real
    assert list(by_label["metric"].fillna("none")) == ["fid", "kid", "none"] and list(by_label["n"]) == [300, 60, 5]
    assert by_label["fid"].isna().tolist() == [False, True, True] and by_label["kid_mean"].notna().tolist() == [True, True, False]
    # FID withheld: one sentence over the rows it concerns, each row's note in the CSV only
    assert "FID is withheld on 1 of 3 rows (metric `kid`)" in per_class and "FID withheld" not in per_class
    assert "| lp-p4 | 1 | 60 | 180 | kid | n/a | 0.03 | 0.0075 |  |" in per_class
    assert by_label["note"].iloc[1] == "FID withheld: ...; KID given instead"


def test_runs_beside_the_papers_say_where_their_protocol_differs(tmp_path):
    root = tmp_path / "results"
    mnist = {"name": "mnist", "classes": list(range(10))}
    weak = quality(features="classifier:mnist", labelled=True, classes=[0, 1])
    paper_like = {**quality(features="inception", n=10000), "protocol": "standard", "papers_comparable": True}
    paper_like["comparability"] = "comparable with the papers' numbers (their network, their protocol)"
    write_record(
        root / "lp-p2",
        new_record(
            record(
                "lp-p2",
                strategy="label_partitioned",
                procs=2,
                scaling="weak",
                quality=weak,
                dataset={"name": "mnist", "classes": [0, 1]},
            )
        ),
    )
    dp = record("dp-p8", procs=8, epochs=1000, quality=paper_like, dataset=mnist, critic_norm="batch")
    write_record(root / "dp-p8", new_record(dp))
    write_record(root / "cell", new_record(record("cell", strategy="cellular", quality=quality(), dataset=mnist)))  # no paper row
    text = whole_report(write_report(root, tmp_path / "report"))
    section = text.split("**Our runs beside them**")[1].split("**Paper 001")[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ") and "run_id" not in line}
    assert set(rows) == {"lp-p2", "dp-p8"}
    # every quality table says, once, which ruler and protocol made its scores and whether the papers' compare
    assert (
        "**Every score below: ruler `inception`, protocol `standard`, comparable with the papers' numbers "
        "(their network, their protocol).**" in text
    )
    assert (  # records from before protocols scored as the suite protocol does
        "**Every score below: ruler `classifier:mnist`, protocol `suite`, not comparable with the papers' numbers: "
        "scored before protocols (the suite protocol).**" in text
    )
    lp = rows["lp-p2"]
    assert "| Distributed DC-CGAN | 3 | 0.1 (10×50) | 2.71 | 0.04 | classifier:mnist | 500 | 0,1 of 10 |" in lp
    assert "ruler classifier:mnist with protocol suite, not Inception with standard: not comparable" in lp
    assert "2 of 10 classes (paper: all)" in lp and "n=500 in 10 splits of 50 (paper: thousands)" in lp
    assert "epochs 1 (paper: 1000)" in lp
    assert (
        rows["dp-p8"].rstrip().endswith("| same protocol |")
        and "| DC-GAN | 3 | 0.1 (10×1000) | 2.54 | 0.54 | inception | 10000 | 0-9 of 10 |" in rows["dp-p8"]
    )
    assert "Only IS measured with the `inception` network is comparable" not in text  # per row now, not one caveat


def test_environment_is_printed_once_with_what_differs(results, tmp_path):
    text = whole_report(write_report(results, tmp_path / "report"))
    env = text.split("\n# Environment\n")[1].split("\n# Runs\n")[0]
    assert "| torch | 2.13.0 |" in env and env.count("2.13.0") == 1
    assert "<summary>What differs between runs</summary>" in env and "| dp-p4-r0 | 4 |" in env  # ranks per node differ


def test_time_outside_training_is_reported(results, tmp_path):
    text = whole_report(write_report(results, tmp_path / "report"))
    # 10 ok runs: wall = train + 5, set-up 3, warm-up 1 (a part of the window), finalize 0.5, scoring 2 (the rest,
    # start-up, clipped at 0)
    assert (
        "were inside training windows (their warm-up 10 s included); set-up 30 s, evaluation during training 0 s, "
        "finalize 5 s, scoring 20 s" in text
    )
    times = pd.read_csv(tmp_path / "report" / "time.csv").set_index("run_id")
    assert times.loc["dp-p1-r0", "train_share"] == pytest.approx(100 / 105)
