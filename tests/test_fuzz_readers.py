"""Every file the suite reads back, fuzzed (issue 43, item 5): real files, mutated, fed to their readers.

Each reader starts from a real file of its kind (a committed record of the digits job, a rank status, a probe, a
checkpoint and its description as the checkpointer writes them, a generator bundle, ``suite sample``'s ``.npz``, a
sample grid PNG, a committed scenario, the committed baselines) and gets it mutated by hypothesis: a field deleted,
added or given a hostile value (NaN, 1e308, huge integers, strings where numbers go, markup, deep nesting, wrong
types), the text truncated, wrapped in brackets or mixed with binary garbage. The property, per case: the reader
returns what it promises (checked further where it can be: finite numbers, images in [-1, 1]) or raises its one
error, whose message is one line that names the file; any other exception fails the test. Nothing is written
where the reader reads. The runs are derandomised (the same cases every time) and kept small (about 15 seconds;
``SUITE_FUZZ_EXAMPLES=N`` searches N random cases per reader instead); a few cases go through the command line as
well, as separate processes (``multiproc``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_files import checkpointer_for, describe_as_written, saved_checkpoints
from test_hostile_records import bundle_fields, digits_records, results_folder

from conftest import REPO
from suite.cli.common import UsageError
from suite.records.codec import IDENTITY, parse_record
from suite.records.record import Record

EXAMPLES = int(os.environ.get("SUITE_FUZZ_EXAMPLES", "0"))
"""Cases per reader for a longer, random search (``SUITE_FUZZ_EXAMPLES=2000``); unset: 40, the same every time."""
FUZZ = settings(
    max_examples=EXAMPLES or 40,
    deadline=None,
    derandomize=not EXAMPLES,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

HOSTILE = st.sampled_from(
    [math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-320, 0, -1, -5.0, 2**63, -(2**64), 10**30, True, "", "fast", "1e-6",
     "<script>alert(1)</script>", "ok; rm -rf /", "../../etc/passwd", "a\nb\x00c", "x" * 5000, [], {}, [[[[]]]]]
)  # fmt: skip
SCALARS = st.one_of(
    HOSTILE,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8,
)
GARBAGE = st.binary(min_size=1, max_size=64)


def locations(doc: Any, here: tuple = ()) -> list[tuple]:
    """Every place in a JSON-like document: the root, each key of each mapping and each item of each list."""
    found = [here]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += locations(value, (*here, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += locations(value, (*here, i))
    return found


def set_at(doc: Any, where: tuple, value: Any, delete: bool = False) -> Any:
    """``doc`` with the node at ``where`` replaced by ``value`` (or deleted); the root replaced returns ``value``."""
    if not where:
        return value
    parent = doc
    for part in where[:-1]:
        parent = parent[part]
    if delete:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return doc


@st.composite
def mutated_doc(draw: st.DrawFn, doc: Any, values: st.SearchStrategy = VALUES) -> Any:
    """``doc`` with one to three of its nodes changed: replaced by a hostile value, deleted, or given a new key."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(locations(doc)))
        how = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if how == "delete" and where:
            doc = set_at(doc, where, None, delete=True)
        elif how == "add" and where == ():
            if isinstance(doc, dict):
                doc[draw(st.sampled_from(["extra", "schema", "status", "rank", "link", "images"]))] = copy.deepcopy(draw(values))
        else:  # a copy: a container drawn twice must not end up inside itself
            doc = set_at(doc, where, copy.deepcopy(draw(values)))
    return doc


@st.composite
def mutated_text(draw: st.DrawFn, doc: Any, dump=lambda d: json.dumps(d)) -> bytes:
    """A mutated ``doc`` as the bytes of a file, sometimes then truncated, wrapped in brackets or mixed with garbage."""
    data = dump(draw(mutated_doc(doc))).encode()
    how = draw(st.sampled_from(["as is", "as is", "as is", "truncated", "wrapped", "garbage", "garbage inside"]))
    if how == "truncated":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif how == "wrapped":
        depth = draw(st.sampled_from([2, 63, 64, 65, 1000, 100_000]))
        data = b"[" * depth + data + b"]" * depth
    elif how == "garbage":
        data = draw(GARBAGE)
    elif how == "garbage inside":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return data


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` with its size and modification time: what a reader must leave as it was."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def refused(error: BaseException, path: Path) -> None:
    """A reader's refusal: one line that names the file."""
    text = str(error)
    assert "\n" not in text and str(path) in text, text


# --- run records ------------------------------------------------------------------------------------------------

RECORDS = digits_records(
    ["cellular-mustangs-mpi-p2-g1x2-s0-r0", "label_partitioned-bce-mpi-p2-s0-r0", "conditional-bce-horovod-p1-s0-r0"]
)
RECORDS.append({**RECORDS[2], "run_id": "failed-r0", "status": "failed", "error": "RuntimeError: boom\nTraceback ..."})


def report_tables(records: list[Record], out: Path) -> None:
    """What the report, suite compare, suite tune and suite project compute from records, short of drawing figures."""
    from suite.analysis.comparable import throughput_problem
    from suite.analysis.conditions import not_learned_warnings
    from suite.analysis.findings import tested_findings
    from suite.analysis.headline import headline_rows
    from suite.analysis.markdown import markdown_table
    from suite.analysis.outcomes import outcomes_section
    from suite.analysis.projection.render import run_projection
    from suite.analysis.report import DEFAULT_BASELINES
    from suite.analysis.report.quality import per_class_section, quality_section
    from suite.analysis.report.scaling_tables import scaling_table
    from suite.analysis.report.tables import communication_table, environment_tables, step_table, time_table, utilization_table
    from suite.measure.network import PRESETS
    from suite.records.results import records_frame

    frame = records_frame(records)
    assert "<script" not in markdown_table(frame)
    scaling = {kind: scaling_table(frame, kind) for kind in ("strong", "weak")}
    rows = headline_rows(records, scaling)
    tested_findings(rows, records, scaling)
    not_learned_warnings(records)
    outcomes_section(records)
    for made in (step_table(records), time_table(frame), communication_table(frame), utilization_table(frame)):
        markdown_table(made)
    environment_tables(records)
    quality_section(records)
    per_class_section(records)
    run_projection(records, PRESETS["summit"], PRESETS["shm"], [1, 2, 64], DEFAULT_BASELINES)
    for record in records:
        throughput_problem(record)


@FUZZ
@given(data=st.data())
def test_fuzzed_records_are_read_or_refused_in_one_line_and_what_is_read_reads_downstream(tmp_path, data):
    from suite.records.results import read_record, read_records

    base = data.draw(st.sampled_from(RECORDS))
    path = tmp_path / "run" / "result.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data.draw(mutated_text(base)))
    before = {k: v for k, v in files_of(tmp_path).items() if not k.startswith("out")}
    try:
        record = read_record(path.parent, IDENTITY)
    except ValueError as error:
        refused(error, path)
    else:
        assert isinstance(record, Record) and all(getattr(record, k) is not None for k in IDENTITY)
        (tmp_path / "out").mkdir(exist_ok=True)
        report_tables([record, *(parse_record(r) for r in RECORDS if r is not base)], tmp_path / "out")
    listing = tmp_path / "records.json"  # the same record inside a records file, as a report writes it
    listing.write_bytes(b"[" + path.read_bytes() + b"]")
    try:
        read_records(listing)
    except ValueError as error:
        refused(error, listing)
    listing.unlink()
    assert {k: v for k, v in files_of(tmp_path).items() if not k.startswith("out")} == before


# --- rank status files ---------------------------------------------------------------------------------------------

STATUS = {"rank": 0, "host": "node3", "pid": 4242, "status": "failed", "time": 1.5e9, "error": "RuntimeError: boom", "traceback": "..."}  # fmt: skip
LOG = "Process 1 exit with status code 137.\nprterun noticed that process rank 0 with PID 4242 on node node3 exited on signal 9"


@FUZZ
@given(data=st.data())
def test_fuzzed_rank_status_files_are_left_out_never_raised_and_the_failure_is_still_named(tmp_path, data):
    from suite.records.failures import first_failure, read_statuses, status_problem

    ranks = tmp_path / "ranks"
    ranks.mkdir(exist_ok=True)
    (ranks / "rank0.json").write_bytes(data.draw(mutated_text(STATUS)))
    (ranks / "rank1.json").write_text(json.dumps({**STATUS, "rank": 1, "status": "running"}))
    before = files_of(tmp_path)
    statuses = read_statuses(tmp_path)
    assert 1 in statuses and all(status_problem(entry, rank) is None for rank, entry in statuses.items())
    failure = first_failure(tmp_path, LOG)
    assert failure is not None and isinstance(failure.line(), str) and "\n" not in failure.line()
    assert files_of(tmp_path) == before


# --- probes --------------------------------------------------------------------------------------------------------

PROBE = {
    "link": {"alpha": 2.1e-6, "beta": 1.1e-10}, "host": "node3", "procs": 2, "engine": "mpi (mpi4py)", "mpi": "Open MPI v4.1",
    "ranks_per_node": 16, "sizes": [8, 1024], "pingpong_s": [2e-6, 2.2e-6], "allreduce_s": [4e-6, 5e-6],
    "allreduce_model_s": [4.2e-6, 4.4e-6], "note": "one machine: intra-node link only",
}  # fmt: skip


@FUZZ
@given(data=st.data())
def test_fuzzed_probes_give_a_network_of_finite_costs_or_one_line_naming_the_file(tmp_path, data):
    from suite.measure.network import allreduce_seconds, probe_network

    probe = tmp_path / "probe.json"
    probe.write_bytes(data.draw(mutated_text({**PROBE, "inter": dict(PROBE["link"])})))
    try:
        net = probe_network(probe)
    except ValueError as error:
        refused(error, probe)
        return
    for link in (net.intra, net.inter):
        assert math.isfinite(link.alpha) and link.alpha >= 0 and math.isfinite(link.beta) and link.beta >= 0
    assert isinstance(net.ranks_per_node, int) and net.ranks_per_node >= 1
    assert math.isfinite(allreduce_seconds(4e6, 1024, net)) and "<" not in net.describe()


# --- checkpoints --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint_files(tmp_path_factory) -> Path:
    """A run folder with one checkpoint (state and description) as the checkpointer writes them."""
    folder = tmp_path_factory.mktemp("checkpoint")
    saved_checkpoints(folder, 1)
    return folder / "checkpoints"


@FUZZ
@given(data=st.data())
def test_fuzzed_checkpoint_descriptions_are_read_or_refused_in_one_line(tmp_path, checkpoint_files, data):
    from suite.train.resume import CheckpointError, Mark, read_mark

    description = tmp_path / "000001-rank0.json"
    description.write_bytes(data.draw(mutated_text(json.loads((checkpoint_files / "000001-rank0.json").read_text()))))
    try:
        mark = read_mark(description)
    except CheckpointError as error:
        refused(error, description)
    else:
        assert isinstance(mark, Mark) and mark.index == 1 and mark.rank == 0 and 0 in mark.group


STATE_FIELDS = [("done",), ("strategy", "steps"), ("strategy", "weights"), ("telemetry", "clock_s"), ("telemetry",),
                ("checkpointer", "last_clock"), ("checkpointer", "segments"), ("strategy",), ("checkpointer",)]  # fmt: skip
TENSORS = st.sampled_from([torch.zeros(0), torch.full((4,), math.nan), torch.zeros(3, 5), torch.zeros(4, dtype=torch.int64)])


@FUZZ
@given(where=st.sampled_from(STATE_FIELDS), value=st.one_of(VALUES, TENSORS))
def test_fuzzed_checkpoint_states_resume_or_end_in_one_line_naming_the_file(tmp_path, checkpoint_files, where, value):
    from suite.train.resume import CheckpointError

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    pt = run_dir / "checkpoints" / "000001-rank0.pt"
    state = torch.load(checkpoint_files / "000001-rank0.pt", weights_only=True)
    torch.save(set_at(state, where, value), pt)
    (run_dir / "checkpoints" / "000001-rank0.json").write_text((checkpoint_files / "000001-rank0.json").read_text())
    describe_as_written(pt)  # a crafted folder: its description vouches for the state
    checkpointer, _, _ = checkpointer_for(run_dir)
    try:
        resumed = checkpointer.restore()
    except CheckpointError as error:
        refused(error, pt)
    else:
        assert resumed is not None and resumed["index"] == 1


# --- generators ---------------------------------------------------------------------------------------------------

BUNDLE = bundle_fields()
BUNDLE_FIELDS = ["kind", "image_size", "channels", "latent_dim", "num_classes", "conditional", "class_prior", "weights",
                 "classes", "architecture", "generators", "format", "extra"]  # fmt: skip


@st.composite
def mutated_bundle(draw: st.DrawFn) -> dict:
    fields = {**BUNDLE, "generators": {"all": dict(BUNDLE["generators"]["all"])}}
    for _ in range(draw(st.integers(1, 2))):
        how = draw(st.sampled_from(["field", "field", "delete", "tensor"]))
        if how == "tensor" and isinstance(fields.get("generators"), dict) and isinstance(fields["generators"].get("all"), dict):
            name = draw(st.sampled_from(sorted(fields["generators"]["all"])))
            fields["generators"]["all"][name] = draw(TENSORS)
        elif how == "delete":
            fields.pop(draw(st.sampled_from(sorted(fields))), None)
        else:
            name = draw(st.sampled_from(BUNDLE_FIELDS))
            fields[name] = draw(
                st.one_of(VALUES, st.integers(-3, 300), st.sampled_from(["single", "per_class", "mixture", "mlp"]))
            )
    return fields


@FUZZ
@given(fields=mutated_bundle(), cut=st.one_of(st.none(), st.integers(0, 4000)))
def test_fuzzed_generators_load_and_sample_images_in_range_or_are_refused_in_one_line(tmp_path, fields, cut):
    from suite.gan.sampling import GeneratorBundle, Sampler

    path = tmp_path / "generator.pt"
    torch.save(fields, path)
    if cut is not None:
        path.write_bytes(path.read_bytes()[:cut])
    try:
        bundle = GeneratorBundle.load(path)
    except ValueError as error:  # UnsafeFileError and UnreadableFileError are ValueErrors
        refused(error, path)
        return
    images, labels = Sampler(bundle).sample(3)
    assert images.shape == (3, bundle.channels, bundle.image_size, bundle.image_size) and len(labels) == 3
    assert bool(torch.isfinite(images).all()) and float(images.abs().max()) <= 1


# --- samples (.npz) -------------------------------------------------------------------------------------------------

DTYPES = st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.uint8, np.bool_, np.complex64])
SHAPES = st.lists(st.sampled_from([0, 1, 2, 3, 20]), min_size=0, max_size=5).map(tuple)


@FUZZ
@given(
    shape=st.one_of(SHAPES, st.just((4, 1, 20, 20))),
    dtype=DTYPES,
    fill=st.sampled_from([0.5, -1.0, 1.0, 2.0, math.nan, math.inf]),
    labels=st.one_of(st.none(), st.sampled_from([np.full(4, -1), np.full(4, 10**12), np.zeros(3), np.full(4, 3.5)])),
    cut=st.one_of(st.none(), st.integers(0, 600)),
)
def test_fuzzed_samples_are_scored_images_in_range_or_refused_in_one_line(tmp_path, shape, dtype, fill, labels, cut):
    from suite.cli.quality import _load_samples

    path = tmp_path / "samples.npz"
    with np.errstate(invalid="ignore"):
        arrays = {"images": np.full(shape, fill).astype(dtype)}
    if labels is not None:
        arrays["labels"] = labels
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    if cut is not None:
        path.write_bytes(path.read_bytes()[:cut])
    try:
        images, read_labels = _load_samples(path)
    except UsageError as error:
        refused(error, path)
        return
    assert images.ndim == 4 and images.shape[0] == len(read_labels) >= 1 and images.shape[1] in (1, 3)
    assert bool(torch.isfinite(images).all()) and float(images.abs().max()) <= 1.001
    assert read_labels.min() >= -1 and read_labels.max() <= 999


# --- sample grids (PNG) ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid_png(tmp_path_factory) -> bytes:
    """A sample grid as the suite saves it: two rows of classes 3 and 7, named in its ``rows`` text chunk."""
    from suite.gan.sampling import save_image_grid

    path = tmp_path_factory.mktemp("grid") / "step_00000010.png"
    save_image_grid(torch.linspace(-1, 1, 8 * 400).reshape(8, 1, 20, 20), path, columns=4, text={"rows": "3,7"})
    return path.read_bytes()


@FUZZ
@given(data=st.data())
def test_fuzzed_sample_grids_are_read_or_refused_in_one_line(tmp_path, grid_png, data):
    from suite.records.images import ImageError, read_pixels
    from suite.records.results import grid_rows

    png = bytearray(grid_png)
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["truncate", "flip", "insert", "size"]))
        at = data.draw(st.integers(0, max(0, len(png) - 1)))
        if how == "truncate":
            png = png[:at]
        elif how == "flip" and png:
            png[at % len(png)] ^= data.draw(st.integers(1, 255))
        elif how == "insert":
            png[at:at] = data.draw(GARBAGE)
        elif how == "size" and len(png) > 24:  # the header's width and height (the CRC left stale, or not)
            png[16:24] = data.draw(st.binary(min_size=8, max_size=8))
    path = tmp_path / "step_00000010.png"
    path.write_bytes(bytes(png))
    try:
        pixels, rows = read_pixels(path, "L"), grid_rows(path)
    except ImageError as error:
        refused(error, path)
    else:
        assert pixels.ndim == 2 and (rows is None or all(0 <= r <= 9999 for r in rows))


# --- scenarios -----------------------------------------------------------------------------------------------------

SCENARIO = yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text())


@FUZZ
@given(data=st.data())
def test_fuzzed_scenarios_are_read_or_refused_in_one_line_naming_the_file(tmp_path, data):
    from suite.config.expansion import load_scenario
    from suite.config.scenario import Scenario

    path = tmp_path / "smoke.yaml"
    path.write_bytes(data.draw(mutated_text(SCENARIO, dump=lambda d: yaml.safe_dump(d, allow_unicode=True))))
    try:
        scenario = load_scenario(path)
    except ValueError as error:  # ScenarioError and YamlError
        first, *more = str(error).split("\n")
        # one problem is one line; several are a line that names the file and counts them, then one line each
        if more:
            assert first.startswith(f"{path}: ") and first.endswith(" problems:"), error
            assert all(line.startswith("  ") and line.strip() for line in more), error
        refused(ValueError(first), path)
    else:
        assert isinstance(scenario, Scenario)


# --- the papers' numbers (baselines/) ------------------------------------------------------------------------------

BASELINES = REPO / "baselines"
NUL = ["\x00"] if sys.version_info >= (3, 11) else []  # 3.10's csv cannot write a NUL
CELLS = st.sampled_from(["", "nan", "inf", "-inf", "1e400", "abc", "<script>alert(1)</script>", "-5", "2x", "0x0", "99999x1",
                         "1,2", '"', *NUL, "3.5", "1e308", "x" * 3000])  # fmt: skip


@FUZZ
@given(data=st.data())
def test_fuzzed_baselines_are_read_with_their_columns_checked_or_refused_in_one_line(tmp_path, data):
    import csv
    import io
    import shutil

    from suite.analysis.baselines import read_baseline
    from suite.analysis.projection.render import paper_points
    from suite.analysis.report.quality import baseline_section

    folder = tmp_path / "baselines"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(BASELINES, folder)
    name = data.draw(st.sampled_from(sorted(p.name for p in folder.glob("*.csv"))))
    rows = list(csv.reader(io.StringIO((folder / name).read_text())))
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["cell", "cell", "header", "drop column", "truncate", "garbage"]))
        if how in ("cell", "header") and rows and rows[0]:
            row = 0 if how == "header" else data.draw(st.integers(0, len(rows) - 1))
            if rows[row]:
                rows[row][data.draw(st.integers(0, len(rows[row]) - 1))] = data.draw(CELLS)
        elif how == "drop column" and rows and rows[0]:
            column = data.draw(st.integers(0, len(rows[0]) - 1))
            rows = [r[:column] + r[column + 1 :] for r in rows]
        elif how == "truncate":
            rows = rows[: data.draw(st.integers(0, len(rows)))]
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    content = text.getvalue().encode()
    if data.draw(st.booleans()) and how == "garbage":
        content = data.draw(GARBAGE)
    path = folder / name
    path.write_bytes(content)
    try:
        read_baseline(path)
    except ValueError as error:
        refused(error, path)
        return
    paper_points(folder)  # what the projection and the report read of it
    baseline_section(folder, [parse_record(r) for r in RECORDS])


# --- a few cases through the command line ---------------------------------------------------------------------------


def suite_command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "suite", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.mark.multiproc
def test_the_command_line_answers_crafted_files_in_one_line_exit_2_without_a_traceback(tmp_path):
    records = digits_records()
    results = results_folder(tmp_path / "results", records)
    (results / records[0]["run_id"] / "result.json").write_text("[" * 100_000)
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({**PROBE, "ranks_per_node": "8"}))
    samples = tmp_path / "samples.npz"
    samples.write_bytes(b"PK\x03\x04 not really")
    generator = tmp_path / "run" / "generator.pt"
    generator.parent.mkdir()
    torch.save({**BUNDLE, "latent_dim": 10**9}, generator)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nruns: [" * 30)
    cases = [
        (["compare", str(results), str(REPO / "reports" / "digits" / "records.json")], results / records[0]["run_id"]),
        (
            ["project", str(REPO / "reports" / "digits" / "records.json"), "--probe", str(probe), "--out", str(tmp_path / "p")],
            probe,
        ),
        (["score", "--samples", str(samples), "--dataset", "digits"], samples),
        (["sample", str(generator.parent), "--out", str(tmp_path / "s.npz")], generator),
        (["run", str(scenario), "--out", str(tmp_path / "out"), "--dry-run"], scenario),
    ]
    before = files_of(tmp_path)
    for args, named in cases:
        done = suite_command(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""
        error_lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert len(error_lines) == 1 and str(named) in error_lines[0], done.stderr
    assert files_of(tmp_path) == before  # nothing written, not even a report, a projection or samples
