"""Files from someone else (issue 43, bugs 9-17): every file the suite reads back from a shared results folder, crafted.

Each case asserts the exact outcome: the exit code (2 for a file that is not what the suite wrote; ``suite report``
names a bad run in a warning and reports the others; ``suite compare`` and the gate call a run without a usable
throughput a failure, never a pass), one line naming the file and the field, no traceback, and nothing written
where the command would have written. The cases start from real files: the committed records of the digits job,
a generator bundle and ``.npz`` samples as the suite writes them.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import REPO, finalize_record, tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.config.jsonfile import MAX_JSON_DEPTH, JsonError, parse_json
from suite.records.codec import check_record
from suite.records.images import MAX_PIXELS, ImageError, read_pixels
from suite.records.integrity import digest_file
from suite.records.record import SCHEMA_VERSION, RecordError
from suite.records.results import iter_records, new_record, write_record
from suite.tools import gate, gate_sides
from suite.tools.gate_files import summary_line

DIGITS = REPO / "reports" / "digits" / "records.json"
CONDITIONAL_P1 = ["conditional-bce-horovod-p1-s0-r0", "conditional-bce-horovod-p1-s1-r0", "conditional-bce-horovod-p1-s2-r0"]


def digits_records(run_ids: list[str] = CONDITIONAL_P1) -> list[dict]:
    """Committed records of the digits job, by run id, marked as of this schema (so that what a case sets is what is
    read: an older record's throughput is recomputed as it is read, :mod:`suite.records.upgrade`)."""
    by_id = {r["run_id"]: r for r in json.loads(DIGITS.read_text())}
    return [{**json.loads(json.dumps(by_id[rid])), "schema": SCHEMA_VERSION} for rid in run_ids]


def results_folder(root: Path, records: list[dict]) -> Path:
    """A results folder of ``records``, one run folder each, written as the suite writes them."""
    for record in records:
        (root / record["run_id"]).mkdir(parents=True, exist_ok=True)
        (root / record["run_id"] / "result.json").write_text(json.dumps(record))
    return root


def one_error_line(capsys) -> str:
    """The command's stderr, which must be one line starting ``error:`` and hold no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- run records (bugs 14-16) ----------------------------------------------------------------------------------


RECORD_CASES = {
    # case: (what the first record's result.json becomes, the field named, words of the message)
    "100,000 [": (lambda r: "[" * 100_000, None, "nested more than 64 levels deep"),
    "wall_s 1e308": (lambda r: {**r, "wall_s": 1e308}, "wall_s", "is not a measurement"),
    "a string where a number goes": (lambda r: {**r, "train_s": "fast"}, "train_s", "expected a number, got 'fast'"),
    "schema 2, a string wall_s": (lambda r: {**r, "schema": 2, "wall_s": "x"}, "wall_s", "expected a number, got 'x'"),
    "NaN wall_s": (lambda r: json.dumps({**r, "wall_s": math.nan}), None, "NaN is not a JSON number"),
    "no status": (lambda r: {k: v for k, v in r.items() if k != "status"}, "status", "required field is missing"),
    "no procs": (lambda r: {k: v for k, v in r.items() if k != "procs"}, "procs", "required field is missing"),
    "status ok; rm -rf /": (lambda r: {**r, "status": "ok; rm -rf /"}, "status", "'ok; rm -rf /' is not one of"),
    "run_id <script>": (lambda r: {**r, "run_id": "<script>alert(1)</script>"}, "run_id", "is not a safe name"),
    "schema 0": (lambda r: {**r, "schema": 0}, "schema", "record schema 0 is not one (1 to"),
    "schema true": (lambda r: {**r, "schema": True}, "schema", "record schema True is not one"),
    "a list": (lambda r: [r], None, "expected a JSON object (a run record), got list"),
    "binary garbage": (lambda r: b"\xff\xfe\x00PK\x03\x04", None, "not UTF-8 text"),
    "truncated": (lambda r: json.dumps(r)[:100], None, "not valid JSON"),
}


def write_case(path: Path, content) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))


@pytest.mark.parametrize("case", RECORD_CASES)
def test_a_crafted_record_is_one_line_naming_its_file_and_field_exit_2_in_compare_tune_and_project(tmp_path, capsys, case):
    records = digits_records()
    root = results_folder(tmp_path / "results", records)
    make, field, words = RECORD_CASES[case]
    bad = root / records[0]["run_id"] / "result.json"
    write_case(bad, make(records[0]))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(digits_records()))
    for command in (
        ["compare", str(root), str(baseline)],
        ["tune", str(root), "--out", str(tmp_path / "tuning")],
        ["project", str(root), "--out", str(tmp_path / "projection")],
    ):
        assert main(command) == 2, command
        line = one_error_line(capsys)
        assert line.startswith(f"error: {bad}: ") and words in line, line
        if field is not None:
            assert f": {field}: " in line, line
    assert not (tmp_path / "tuning").exists() and not (tmp_path / "projection").exists()


def test_the_report_names_each_bad_record_and_pixel_bomb_in_a_warning_and_writes_record_strings_as_data(tmp_path, caplog):
    records = digits_records()
    failed = {**records[2], "status": "failed", "error": "<script>alert(1)</script> | injected\nTraceback ..."}
    root = results_folder(tmp_path / "results", [records[0], records[1], failed])
    evil = root / "evil" / "result.json"
    evil.parent.mkdir()
    evil.write_text(json.dumps({**records[0], "run_id": "<script>alert(1)</script>"}))
    deep = root / "deep" / "result.json"
    deep.parent.mkdir()
    deep.write_text("[" * 100_000)
    run = root / records[0]["run_id"]  # its samples: pixel bombs past the suite's limit (bug 12)
    pixel_bomb(run / "samples.png", 6_000)
    (run / "samples").mkdir()
    pixel_bomb(run / "samples" / "step_00000010.png", 6_000)
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out)]) == 0
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped ")]
    assert warned[:2] == [
        f"skipped {deep}: not a valid result record (nested more than 64 levels deep; not a file the suite wrote); "
        "delete it and rerun the run",
        f"skipped {evil}: run_id: '<script>alert(1)</script>' is not a safe name: use ASCII letters, digits, '.', '_' "
        "and '-', starting with a letter or digit, at most 100 characters",
    ]
    bombs = sorted(warned[2:])
    assert [line.split(": ")[0] for line in bombs] == [
        f"skipped {run / 'samples.png'}",
        f"skipped {run / 'samples' / 'step_00000010.png'}",
    ]
    assert all("6000 x 6000 pixels, more than the 33,554,432 an image may have here" in line for line in bombs)
    reported = json.loads((out / "records.json").read_text())
    assert sorted(r["run_id"] for r in reported) == sorted(CONDITIONAL_P1)
    pages = [out / "report.md", *sorted((out / "details").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    assert "<script" not in text and "&lt;script>alert(1)&lt;/script> \\| injected" in text
    assert not (out / "samples").exists()  # the bomb is not copied into the report


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_records_of_every_schema_version_are_checked(version):
    with pytest.raises(RecordError, match=r"^r.json: train_s: expected a number, got 'fast'$"):
        check_record({"schema": version, "run_id": "r", "train_s": "fast"}, "r.json")
    with pytest.raises(RecordError, match=r"^r.json: status: 'done' is not one of ok, failed, interrupted, diverged$"):
        check_record({"schema": version, "run_id": "r", "status": "done"}, "r.json")


def test_a_record_without_a_schema_key_is_refused_not_read_as_schema_1(tmp_path):
    (record,) = digits_records(CONDITIONAL_P1[:1])
    del record["schema"]
    with pytest.raises(RecordError, match="^r.json: schema: required field is missing; every record the suite writes"):
        check_record(record, "r.json")
    with pytest.raises(RecordError, match=r"^r.json: schema: record schema 99 is newer than this suite reads"):
        check_record({**record, "schema": 99}, "r.json")


def test_json_nesting_is_counted_before_parsing_and_strings_do_not_count():
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "f") is not None
    with pytest.raises(JsonError, match=r"^f: nested more than 64 levels deep"):
        parse_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "f")
    assert parse_json(json.dumps({"a": "[" * 10_000}), "f") == {"a": "[" * 10_000}
    for text, words in (("1e400", "1e400 is too large for a number"), ("-Infinity", "-Infinity is not a JSON number")):
        with pytest.raises(JsonError, match=f"^f: {words}"):
            parse_json(text, "f")
    with pytest.raises(JsonError, match="is too large for an integer"):
        parse_json("1" * 30, "f")


def test_a_fifo_in_place_of_a_record_is_refused_without_waiting(tmp_path, capsys):
    root = results_folder(tmp_path / "results", digits_records())
    fifo = root / CONDITIONAL_P1[0] / "result.json"
    fifo.unlink()
    import os

    os.mkfifo(fifo)
    assert main(["compare", str(root), str(DIGITS)]) == 2
    assert one_error_line(capsys) == f"error: {fifo}: not a valid result record (not a regular file); delete it and rerun the run"


# --- rank status files (bug 9) ---------------------------------------------------------------------------------


def test_a_rank_status_that_is_not_one_is_named_and_the_launchers_part_of_the_record_is_still_written(tmp_path, caplog):
    (run,) = expand(parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    (tmp_path / "ranks").mkdir()
    status = tmp_path / "ranks" / "rank0.json"
    status.write_text(json.dumps({"rank": "x"}))
    record = finalize_record(run, tmp_path, ["mpirun", "python"], 1, 2.0)
    assert record.status == "failed" and record.command == "mpirun python" and record.exit_code == 1
    assert record.wall_s == 2.0 and record.error.startswith("exited with code 1 before writing a result")
    assert f"{status}: not a rank's status file, left out (rank: expected 0, the rank its name gives, got 'x')" in [
        r.getMessage() for r in caplog.records
    ]
    assert json.loads((tmp_path / "result.json").read_text())["command"] == "mpirun python"


# --- generators (bug 10) -----------------------------------------------------------------------------------


def bundle_fields() -> dict:
    """The fields of a generator bundle as the suite writes it (a 20-pixel DCGAN generator, latent 16)."""
    from suite.gan.models import build_pair

    torch.manual_seed(0)
    generator, _ = build_pair(20, 1, 16, 0)
    state = {k: v.clone() for k, v in generator.state_dict().items()}
    prior = {c: 0.1 for c in range(10)}
    return {"format": 1, "kind": "single", "image_size": 20, "channels": 1, "latent_dim": 16, "num_classes": 10,
            "conditional": False, "generators": {"all": state}, "class_prior": prior}  # fmt: skip


def nan_weights(fields: dict) -> dict:
    state = fields["generators"]["all"]
    fields["generators"]["all"] = {k: torch.full_like(v, math.nan) if v.is_floating_point() else v for k, v in state.items()}
    return fields


GENERATOR_CASES = {
    "latent_dim 1e9": (lambda f: {**f, "latent_dim": 10**9}, "latent_dim: must be at most 4096, got 1000000000"),
    "image_size 2^20": (lambda f: {**f, "image_size": 2**20}, "image_size: must be at most 256, got 1048576"),
    "image_size abc": (lambda f: {**f, "image_size": "abc"}, "image_size: expected an integer, got 'abc'"),
    "another network's weights": (
        lambda f: {**f, "latent_dim": 32},
        "generators.all: not the weights of the dcgan generator its image_size, latent_dim and classes describe",
    ),
    "NaN weights": (nan_weights, "generators.all.input.0.weight: holds NaN or infinite weights"),
    "a tensor as kind": (lambda f: {**f, "kind": torch.zeros(3)}, "kind: expected one of single, per_class, mixture"),
    "a prior of nothing": (lambda f: {**f, "class_prior": {}}, "class_prior: expected finite non-negative probabilities"),
}


@pytest.mark.parametrize("case", GENERATOR_CASES)
def test_a_crafted_generator_is_one_line_naming_the_file_and_field_in_sample_and_score(tmp_path, capsys, case):
    make, words = GENERATOR_CASES[case]
    path = tmp_path / "generator.pt"
    torch.save(make(bundle_fields()), path)
    # a crafted run folder whose record vouches for the file: its sha256 matches, its fields are what is wrong
    write_record(tmp_path, new_record({"run_id": "r", "status": "ok", "model_files": {"generator.pt": vars(digest_file(path))}}))
    out = tmp_path / "s.npz"
    for command in (["sample", str(tmp_path), "--out", str(out), "--n", "4"], ["score", "--run", str(tmp_path), "--n", "8"]):
        assert main(command) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"error: {path}: ") and words in line and line.endswith("; not a generator the suite wrote")
    assert not out.exists()


def test_an_intact_generator_still_samples_images_in_range(tmp_path, capsys):
    torch.save(bundle_fields(), tmp_path / "generator.pt")
    assert main(["sample", str(tmp_path), "--out", str(tmp_path / "s.npz"), "--n", "4"]) == 0
    images = np.load(tmp_path / "s.npz")["images"]
    assert images.shape == (4, 1, 20, 20) and np.isfinite(images).all() and np.abs(images).max() <= 1


# --- samples (bug 11) ----------------------------------------------------------------------------------------


def huge_header_npz(path: Path) -> None:
    """An .npz whose images header claims 12 TiB (1 M images of 3 x 1024 x 1024 floats), with 16 bytes of data."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 20, 3, 1024, 1024)})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("images.npy", header.getvalue() + bytes(16))


def images(n: int = 4, value: float = 0.5) -> np.ndarray:
    return np.full((n, 1, 20, 20), value, np.float32)


SAMPLE_CASES = {
    "not a zip": (lambda p: p.write_text("hello"), "not an .npz archive (not a zip file)"),
    "empty": (lambda p: p.write_bytes(b""), "not an .npz archive (not a zip file)"),
    "zero images": (lambda p: np.savez(p, images=images(0)), "images: expected (N, C, H, W) with N at least 1"),
    "a header claiming 12 TiB": (
        huge_header_npz,
        f"images: shape (1048576, 3, 1024, 1024) of float32 is {(1 << 20) * 3 * 4 << 20:,} bytes",
    ),
    "labels of 1e12": (
        lambda p: np.savez(p, images=images(), labels=np.full(4, 10**12)),
        "labels: expected class labels 0 to 999 (-1: unconditional), got 1000000000000..1000000000000",
    ),
    "NaN images": (lambda p: np.savez(p, images=images(value=math.nan)), "images: holds NaN or infinite values"),
    "objects": (lambda p: np.savez(p, images=np.array([{}, 1], dtype=object)), "images: expected floating-point numbers"),
    "no images": (lambda p: np.savez(p, pictures=images()), "images: no such array (it holds pictures)"),
    "too few labels": (lambda p: np.savez(p, images=images(), labels=np.zeros(3, np.int64)), "labels: expected one label per"),
}


@pytest.mark.parametrize("case", SAMPLE_CASES)
def test_crafted_samples_are_one_line_naming_the_file_and_array(tmp_path, capsys, case):
    make, words = SAMPLE_CASES[case]
    path = tmp_path / "s.npz"
    make(path)
    assert main(["score", "--samples", str(path), "--dataset", "digits"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --samples: {path}: ") and words in line, line


# --- images (bug 12) -----------------------------------------------------------------------------------------


def pixel_bomb(path: Path, side: int = 20_000) -> None:
    """A valid PNG of side x side grey pixels, all 0: a few hundred KB that decode to side^2 bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    rows = bytes((side + 1) * 256)  # 256 rows at a time: compressing zeros costs little, calling zlib does
    data = b"".join(packer.compress(rows) for _ in range(side // 256)) + packer.compress(bytes((side + 1) * (side % 256)))
    data += packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))


def test_a_pixel_bomb_is_refused_from_its_header(tmp_path):
    bomb = tmp_path / "step_00000010.png"
    pixel_bomb(bomb, 6_000)  # 36 M pixels: past the suite's limit, below Pillow's own
    assert bomb.stat().st_size < 100_000 and 6_000**2 > MAX_PIXELS
    with pytest.raises(ImageError, match=rf"^{bomb}: 6000 x 6000 pixels, more than the 33,554,432 an image may have"):
        read_pixels(bomb)
    (tmp_path / "text.png").write_text("not a png")
    with pytest.raises(ImageError, match="not an image the suite reads"):
        read_pixels(tmp_path / "text.png")
    pixel_bomb(tmp_path / "huge.png", 13_400)  # 180 M pixels: Pillow's own limit refuses it as it opens
    with pytest.raises(ImageError, match=rf"^{tmp_path / 'huge.png'}: an image too large to read"):
        read_pixels(tmp_path / "huge.png")


# --- probes (bug 13) ------------------------------------------------------------------------------------------

PROBE = {"link": {"alpha": 1e-6, "beta": 1e-9}, "host": "h", "procs": 2, "engine": "mpi", "ranks_per_node": 4}
PROBE_CASES = {
    "a string alpha": ({**PROBE, "link": {"alpha": "1e-6", "beta": 1e-9}}, "link.alpha: expected a finite number of seconds"),
    "inter without beta": ({**PROBE, "inter": {"alpha": 1e-6}}, "inter.beta: required field is missing"),
    "a string ranks_per_node": ({**PROBE, "ranks_per_node": "8"}, "ranks_per_node: expected a whole number from 1 to"),
    "negative ranks per node": ({**PROBE, "ranks_per_node": -2}, "ranks_per_node: expected a whole number from 1 to"),
    "a negative alpha": ({**PROBE, "link": {"alpha": -1, "beta": 1e-9}}, "link.alpha: must be from 0 to 1 seconds, got -1"),
    "a NaN beta": ('{"link": {"alpha": 1e-6, "beta": NaN}}', "NaN is not a JSON number"),
    "an alpha of 1e308": ({**PROBE, "inter": {"alpha": 1e308, "beta": 1e-9}}, "inter.alpha: must be from 0 to 1 seconds, got 1e+308"),
    "a list": ([PROBE], "not a probe file written by `suite probe` (a JSON object), got list"),
}  # fmt: skip


@pytest.mark.parametrize("case", PROBE_CASES)
def test_a_crafted_probe_is_one_line_naming_the_file_and_field(tmp_path, capsys, case):
    data, words = PROBE_CASES[case]
    probe = tmp_path / "probe.json"
    probe.write_text(data if isinstance(data, str) else json.dumps(data))
    out = tmp_path / "projection"
    assert main(["project", str(DIGITS), "--probe", str(probe), "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {probe}: ") and words in line, line
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--alpha", "nan", "--beta", "nan"], "error: --alpha: expected a finite number of seconds, got nan"),
        (["--alpha", "1e-6", "--beta", "-1"], "error: --beta: must be from 0 to 1 seconds, got -1.0"),
        (["--compute-scale", "nan"], "error: --compute-scale: must be positive (0.01: a device 100 times faster than the measured one)"),
    ],
)  # fmt: skip
def test_a_projection_from_nan_or_negative_inputs_is_refused(tmp_path, capsys, args, line):
    assert main(["project", str(DIGITS), *args, "--out", str(tmp_path / "projection")]) == 2
    assert one_error_line(capsys) == line and not (tmp_path / "projection").exists()


# --- compare and the gate (bug 17) -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 0, -5.0])
@pytest.mark.parametrize("side", ["new", "baseline"])
def test_compare_calls_an_ok_run_without_a_throughput_invalid_never_a_pass(tmp_path, capsys, value, side):
    good, bad = digits_records(), digits_records()
    bad[0]["images_per_s"] = value  # its interval is kept: unchanged, it would put 0 or -5 "within noise"
    files = {"new": tmp_path / "new.json", "baseline": tmp_path / "baseline.json"}
    files[side].write_text(json.dumps(bad))
    files["baseline" if side == "new" else "new"].write_text(json.dumps(good))
    assert main(["compare", str(files["new"]), str(files["baseline"])]) == 1
    text = capsys.readouterr().out
    problem = "images_per_s is missing" if value is None else f"images_per_s is {value!r}, not a throughput"
    note = f"run {CONDITIONAL_P1[0]} ({'new results' if side == 'new' else 'baseline'}, {files[side]}): {problem}"
    assert f"**1 INVALID record**: {note}; an ok run records a positive throughput." in text
    assert "No regression" not in text and "| **INVALID** |" in text


def test_compare_refuses_a_nan_throughput_in_one_line_naming_the_file(tmp_path, capsys):
    records = digits_records()
    new = tmp_path / "new.json"
    new.write_text(json.dumps([{**records[0], "images_per_s": math.nan}, *records[1:]]))
    assert main(["compare", str(new), str(DIGITS)]) == 2
    assert one_error_line(capsys) == f"error: {new}: NaN is not a JSON number (a missing number is null)"


def pairs_with(side: str, value) -> list[dict]:
    """Five gate pairs of one run, its throughput ``value`` on ``side`` in pair 2 (the others 1000 on both sides)."""
    pairs = []
    for i in range(5):
        values = {key: {"images_per_s": 1000.0, "step_p50": 0.064, "comm_bytes": 5, "model_digest": "d"} for key in "AB"}
        if i == 2:
            values[side]["images_per_s"] = value
        pairs.append(
            {
                "pair": i,
                "A": {"r0": values["A"]},
                "B": {"r0": values["B"]},
                "dirs": {k: Path(f"out/pair{i:02d}/{k}") for k in "AB"},
            }
        )
    return pairs  # fmt: skip


@pytest.mark.parametrize("value", [None, math.nan, 0, -5.0])
@pytest.mark.parametrize(("side", "verdict", "who"), [("B", "FAIL", "candidate (B)"), ("A", "INCONCLUSIVE", "baseline (A)")])
def test_the_gate_calls_a_run_without_a_throughput_fail_or_inconclusive_naming_the_record(value, side, verdict, who):
    settings = gate.Settings(scenario=Path("s"), out=Path("o"))
    rows = gate.speed_verdicts(pairs_with(side, value), settings)
    (row,) = [r for r in rows if r["metric"] == "images_per_s"]
    problem = "images_per_s is missing" if value is None else f"images_per_s is {value!r}, not a "
    assert row["verdict"] == verdict and row["problem"].startswith(f"{who}, pair 2: {problem}")
    assert row["problem"].endswith(f"in {Path('out/pair02') / side / 'r0' / 'result.json'}")
    line = summary_line(verdict, rows, settings.threshold)
    assert line.startswith(f"{verdict}: ") and row["problem"] in line


def test_a_crafted_record_in_a_gate_workload_is_one_line_naming_the_side_and_file(tmp_path, monkeypatch):
    out = tmp_path / "pair00" / "A"

    def fake_run(*args, **kwargs):  # the workload "ran" and left a record someone crafted
        results_folder(out, [{**digits_records()[0], "images_per_s": "fast"}])
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(gate.subprocess, "run", fake_run)
    side = gate_sides.Side("baseline", "HEAD~1", "abc", tmp_path, Path("python"))
    with pytest.raises(gate.GateError) as error:
        gate.run_workload(side, tmp_path / "s.yaml", out, 60)
    bad = out / CONDITIONAL_P1[0] / "result.json"
    assert str(error.value) == f"baseline side (HEAD~1): {bad}: images_per_s: expected a number, got 'fast'"


def test_every_committed_record_passes_the_checks(tmp_path):
    """The checks refuse nothing the suite wrote: every committed record reads back."""
    for source in sorted((REPO / "reports").rglob("records.json")):
        shutil.rmtree(tmp_path / "r", ignore_errors=True)
        records = json.loads(source.read_text())
        for record in records:
            write_record(tmp_path / "r" / record["run_id"], new_record(record))
        assert [r.run_id for r in iter_records(tmp_path / "r")] == sorted(r["run_id"] for r in records)
