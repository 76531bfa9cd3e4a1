"""The first page names the machine and the host's load; every CSV of a report holds numbers where it holds numbers."""

import csv
import math
import re

from test_report import quality, record

from suite.analysis.report import write_report
from suite.analysis.report.headline_view import CSV_QUANTITIES, CSV_TEXT
from suite.analysis.report.machine_line import machine_lines
from suite.records.results import new_record, write_record

DISPLAY = re.compile(r"\d \[[-\d.e+]+, [-\d.e+]+\]|\(n=|^\d+(,\d+)+$")
"""A display string: ``24.7 [18.4, 33.1]``, ``(n=3)``, a list of process counts ``1,2``."""
KEY_VALUE = {("environment.csv", "value")}
"""Columns that hold one value of each key's own kind (a version beside a core count): words, never tested as numbers."""


def _number(text: str) -> bool:
    try:
        return not math.isnan(float(text)) or text.lower() == "nan"
    except ValueError:
        return False


def _busy(load: float) -> dict:
    return {"contended": load > 0.1, "outside_cores": load, "cores": 8, "free_cores": 0.0, "contention": "busy"}


def _results(tmp_path, host_load=True, kid_only=False):
    root = tmp_path / "results"

    def fid(value):
        return None if kid_only else value

    runs = [
        record(f"dp-p{p}-s{s}", procs=p, train_s=100.0 / p + s, seed=s, quality=quality(fid=fid(50.0)), threads_per_rank=2)
        for p in (1, 2)
        for s in (0, 1, 2)
    ]
    runs += [
        record(f"c-p2-s{s}", strategy="conditional", procs=2, train_s=60.0 + s, seed=s, quality=quality(fid=fid(40.0 + s)))
        for s in (0, 1, 2)
    ]
    for i, r in enumerate(runs):
        r["machine"] = {"cpu_model": "Test CPU 9000", "cores": 8, "gpu": None, "fingerprint": "f", "numerics": "n"}
        if host_load:
            r["host_load"] = _busy(0.5 if i < 2 else 0.0)
        write_record(root / r["run_id"], new_record(r))
    return root


def test_first_page_names_the_cpu_threads_per_rank_and_the_busy_host(tmp_path):
    first = write_report(_results(tmp_path), tmp_path / "report").read_text().splitlines()
    opening = "\n".join(first[:6])  # the title, the provenance line, then the machine
    assert "**Ran on** CPU only: Test CPU 9000, 8 cores, 1-2 threads per rank, 1-2 ranks (9 timed runs)." in opening
    assert "**Busy host**: 2 of 9 measured runs were contended" in opening
    assert opening.index("**Ran on**") < "\n".join(first).index("## Headline")


def test_machine_lines_name_the_gpus_and_a_quiet_or_unmeasured_host():
    gpu = [record(f"g{p}", procs=p, device="NVIDIA H100 80GB HBM3", threads_per_rank=4, host_load=_busy(0.0)) for p in (1, 4)]
    for r in gpu:
        r["machine"] = {"cpu_model": "Xeon", "cores": 16, "gpu": "NVIDIA H100 80GB HBM3"}
    line = machine_lines([new_record(r) for r in gpu])[0]
    assert "1-4 GPUs (one per rank): NVIDIA H100 80GB HBM3; host Xeon, 16 cores, 4 threads per rank" in line
    assert "**Quiet host**: none of the 2 measured runs was contended." in line
    unmeasured = machine_lines([new_record(record("c", threads_per_rank=1))])[0]
    assert "1 thread per rank" in unmeasured and "**Host load** not measured" in unmeasured


def test_every_numeric_column_of_every_report_csv_parses_as_numbers(tmp_path):
    out = tmp_path / "report"
    write_report(_results(tmp_path, kid_only=True), out)
    files = sorted(out.glob("*.csv"))
    assert len(files) > 10
    for path in files:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        for column in rows[0].keys() if rows else ():
            cells = [row[column] for row in rows if row[column] != ""]
            shown = [c for c in cells if DISPLAY.search(c)]
            assert not shown, f"{path.name}:{column} holds display strings: {shown[:2]}"
            numbers = [c for c in cells if _number(c)]
            if numbers and (path.name, column) not in KEY_VALUE:
                assert len(numbers) == len(cells), f"{path.name}:{column} mixes numbers and words: {cells[:3]}"


def test_headline_csv_has_estimate_interval_and_draws_for_every_quantity(tmp_path):
    out = tmp_path / "report"
    write_report(_results(tmp_path), out)
    with (out / "headline.csv").open(newline="") as f:
        rows = {row["strategy"]: row for row in csv.DictReader(f)}
    columns = set(next(iter(rows.values())))
    for name in CSV_QUANTITIES:
        assert {f"{name}_estimate", f"{name}_lo", f"{name}_hi", f"{name}_n"} <= columns, name
    for column in columns - set(CSV_TEXT):
        assert all(_number(row[column]) or row[column] == "" for row in rows.values()), column
    dp = rows["data_parallel / bce / horovod"]
    assert (dp["P"], dp["P_smallest"], dp["seeds"]) == ("2", "1", "3")
    # the strong sweep's T(1) over T(2): geometric means of 100, 101, 102 and 50, 51, 52
    t1, t2 = math.prod((100.0, 101.0, 102.0)) ** (1 / 3), math.prod((50.0, 51.0, 52.0)) ** (1 / 3)
    assert math.isclose(float(dp["speedup_estimate"]), t1 / t2, rel_tol=1e-9)
    assert math.isclose(float(dp["efficiency_estimate"]), t1 / t2 / 2, rel_tol=1e-9)
    assert float(dp["efficiency_lo"]) < float(dp["efficiency_estimate"]) < float(dp["efficiency_hi"])
    assert (dp["speedup_n"], dp["train_s_n"]) == ("3", "3")
    assert math.isclose(float(dp["train_s_estimate"]), t2, rel_tol=1e-9)
    assert rows["conditional / bce / horovod"]["speedup_estimate"] == ""  # no P = 1 run: no number, not "n/a"


def test_a_kid_headline_says_its_units(tmp_path):
    text = write_report(_results(tmp_path, kid_only=True), tmp_path / "report").read_text()
    assert "| KID |" in text and "torch-fidelity's and clean-fid's units (no ×10³ scale)" in text
