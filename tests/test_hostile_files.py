"""Files from someone else, and files that went wrong: reading one never runs code, and a damaged one costs a
checkpoint, never a run or a sweep.

The pickle bomb is a file whose unpickling runs ``touch MARKER`` through ``os.system``; the tests
check first that it is live (plain :func:`pickle.load` creates the marker), then that no way the
suite reads checkpoints, generators and class generators ever does.
"""

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import socket
from pathlib import Path

import pytest
import torch

from conftest import finalize_record, run_scenario, tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.gan.tensorfiles import UnreadableFileError, UnsafeFileError, save_tensors
from suite.measure.telemetry import CommStats, Telemetry
from suite.records.integrity import IntegrityError, digest_file
from suite.records.results import CHECKPOINT_DIR, new_record, read_record, write_record
from suite.strategies.label_partitioned.strategy import _load_classes
from suite.train.checkpoint import Checkpointer
from suite.train.resume import CheckpointError, Mark, describe_checkpoint, resume_plan

HOST = socket.gethostname()
MARK_FIELDS = [
    f.name for f in dataclasses.fields(Mark) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
]
SYSTEM = f"{os.system.__module__}.system"  # how a pickle names os.system: posix.system


# --- the pickle bomb ------------------------------------------------------------------------------------------


class Bomb:
    """Unpickled, runs ``touch marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def write_bomb(path: Path, marker: Path, form: str) -> None:
    """A bomb as torch.save writes files (a zip archive holding the pickle) or as a bare pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "torch.save":
        torch.save({"format": 1, "state": Bomb(marker)}, path)
    else:
        path.write_bytes(pickle.dumps(Bomb(marker)))


@pytest.fixture
def marker(tmp_path):
    """The bomb's marker file; the bomb is shown live once (plain pickle runs it), then the marker is removed."""
    marker = tmp_path / "BOOM"
    pickle.loads(pickle.dumps(Bomb(marker)))
    assert marker.exists()
    marker.unlink()
    return marker


def refusal(path: Path, what: str, form: str) -> str:
    """The one line a bomb in ``path`` is refused with."""
    if form == "torch.save":
        return f"{path}: refused to load this {what}: it asks for {SYSTEM}, which is not a tensor or plain data; nothing in it was run"
    return f"{path}: not a {what} (not a zip archive as torch.save writes them)"


FORMS = ["torch.save", "pickle"]


# --- checkpoints ------------------------------------------------------------------------------------------------


class CountingStrategy:
    """A strategy whose whole state is a step count and a tensor (what the checkpointer needs of one)."""

    def __init__(self, engine):
        self.engine, self.steps, self.restored = engine, 0, None

    def peers(self):
        return self.engine.world()

    def checkpoint(self):
        return {"steps": self.steps, "weights": torch.full((4,), float(self.steps))}

    def restore(self, load):
        self.restored = load(0)


def checkpointer_for(run_dir: Path):
    from test_training import SoloEngine

    scenario = tiny_scenario(
        "s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}], train={"checkpoint_every": {"steps": 1}}
    )
    run, engine = expand(parse_scenario(scenario))[0], SoloEngine()
    checkpointer = Checkpointer(run, run_dir, engine, Telemetry(engine.device, CommStats()))
    strategy = CountingStrategy(engine)
    checkpointer.attach(strategy)
    return checkpointer, strategy, run


def saved_checkpoints(run_dir: Path, count: int):
    """``count`` checkpoints of one rank at steps 1..count; the run they belong to."""
    checkpointer, strategy, run = checkpointer_for(run_dir)
    for step in range(1, count + 1):
        strategy.steps = step
        checkpointer.save()
    return run


def describe_as_written(pt: Path) -> None:
    """Rewrite the description beside ``pt`` with ``pt``'s size and sha256, as a crafted folder would."""
    description = pt.with_suffix(".json")
    meta = json.loads(description.read_text())
    meta.update(bytes=pt.stat().st_size, sha256=hashlib.sha256(pt.read_bytes()).hexdigest())
    description.write_text(json.dumps(meta))


def test_safeload_checkpoint_descriptions_record_the_size_and_sha256_and_resume_restores_the_state(tmp_path):
    saved_checkpoints(tmp_path, 2)
    pt = tmp_path / CHECKPOINT_DIR / "000002-rank0.pt"
    meta = json.loads(pt.with_suffix(".json").read_text())
    assert meta["format"] == 2 and meta["bytes"] == pt.stat().st_size
    assert meta["sha256"] == hashlib.sha256(pt.read_bytes()).hexdigest()
    checkpointer, strategy, _ = checkpointer_for(tmp_path)
    assert checkpointer.restore()["index"] == 2
    assert strategy.restored["steps"] == 2 and torch.equal(strategy.restored["weights"], torch.full((4,), 2.0))
    assert checkpointer.skipped == []


@pytest.mark.parametrize("how", ["truncated", "altered"])
def test_safeload_a_damaged_newest_checkpoint_is_skipped_and_the_one_before_resumed(tmp_path, how):
    run = saved_checkpoints(tmp_path, 2)
    pt = tmp_path / CHECKPOINT_DIR / "000002-rank0.pt"
    data, written = pt.read_bytes(), digest_file(pt)
    if how == "truncated":
        pt.write_bytes(data[: len(data) // 2])
        why = f"has {len(data) // 2} bytes, {len(data)} were written (truncated or damaged)"
    else:  # the same size, one byte changed
        pt.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
        actual = hashlib.sha256(pt.read_bytes()).hexdigest()
        why = f"has sha256 {actual[:12]}..., {written.sha256[:12]}... was written (damaged or replaced)"
    skipped = [f"checkpoint 2: 000002-rank0.pt {why}"]
    plan = resume_plan(tmp_path, run)
    assert plan.ranks == {0: 1} and plan.skipped == skipped
    assert describe_checkpoint(plan.checkpoint(), plan.skipped) == (
        f"--resume continues from checkpoint 1 (step 1, 0 s of training), skipping checkpoint 2: 000002-rank0.pt {why}"
    )
    checkpointer, strategy, _ = checkpointer_for(tmp_path)
    assert checkpointer.restore()["index"] == 1 and strategy.restored["steps"] == 1
    assert checkpointer.part(0.0).checkpoints_skipped == skipped
    assert not pt.exists() and not pt.with_suffix(".json").exists()  # the damaged checkpoint is removed


def test_safeload_without_an_intact_checkpoint_the_run_starts_again_and_says_why(tmp_path):
    run = saved_checkpoints(tmp_path, 1)
    (tmp_path / CHECKPOINT_DIR / "000001-rank0.pt").unlink()
    plan = resume_plan(tmp_path, run)
    assert plan.ranks == {0: None} and plan.checkpoint() is None
    assert describe_checkpoint(None, plan.skipped) == (
        "no intact checkpoint: --resume starts it again from step 0, skipping checkpoint 1: 000001-rank0.pt is missing"
    )


def test_safeload_a_format_1_checkpoint_of_an_older_suite_still_resumes_with_its_size_checked(tmp_path):
    run = saved_checkpoints(tmp_path, 2)
    for index in (1, 2):  # descriptions as the suite wrote them before sha256
        path = tmp_path / CHECKPOINT_DIR / f"00000{index}-rank0.json"
        meta = json.loads(path.read_text())
        del meta["sha256"]
        path.write_text(json.dumps({**meta, "format": 1}))
    pt = tmp_path / CHECKPOINT_DIR / "000002-rank0.pt"
    size = pt.stat().st_size
    pt.write_bytes(pt.read_bytes()[:-1])
    plan = resume_plan(tmp_path, run)
    assert plan.ranks == {0: 1}
    assert plan.skipped == [f"checkpoint 2: 000002-rank0.pt has {size - 1} bytes, {size} were written (truncated or damaged)"]


@pytest.mark.parametrize("form", FORMS)
def test_safeload_a_pickle_bomb_as_checkpoint_is_refused_in_one_line(tmp_path, marker, form):
    saved_checkpoints(tmp_path, 1)
    pt = tmp_path / CHECKPOINT_DIR / "000001-rank0.pt"
    write_bomb(pt, marker, form)
    describe_as_written(pt)  # its description vouches for it: only the loading can refuse it
    checkpointer, strategy, _ = checkpointer_for(tmp_path)
    with pytest.raises((UnsafeFileError, UnreadableFileError)) as refused:
        checkpointer.restore()
    hint = f"; delete {tmp_path / CHECKPOINT_DIR} to start the run again from step 0"
    assert str(refused.value) == refusal(pt, "checkpoint", form) + hint
    assert not marker.exists() and strategy.restored is None


def test_safeload_a_pickle_bomb_in_place_of_a_checkpoint_is_skipped_by_its_sha256(tmp_path, marker):
    run = saved_checkpoints(tmp_path, 2)
    pt = tmp_path / CHECKPOINT_DIR / "000002-rank0.pt"
    write_bomb(pt, marker, "torch.save")
    checkpointer, strategy, _ = checkpointer_for(tmp_path)
    assert checkpointer.restore()["index"] == 1 and strategy.restored["steps"] == 1
    assert checkpointer.skipped[0].startswith("checkpoint 2: 000002-rank0.pt has ")
    assert not marker.exists() and resume_plan(tmp_path, run).ranks == {0: 1}


MALFORMED = {
    "emptied": ("", "not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    "nested 100,000 deep": ("[" * 100_000, "nested more than 64 levels deep; not a file the suite wrote"),
    "an empty object": (  # every missing field at once
        "{}",
        "; ".join(
            f"{name}: required field is missing"
            for name in ("index", "rank", "group", "steps", "clock_s", "done", "fingerprint", "bytes")
        ),
    ),
    "a list": ("[1, 2]", "expected a JSON object, got list"),
    "a string rank": (None, "rank: expected an integer, got '0'"),
    "another rank's": (None, "it describes checkpoint 1 of rank 3 in group [3]"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_safeload_a_malformed_checkpoint_description_is_one_line_naming_it_and_the_record_says_so(tmp_path, case):
    run = saved_checkpoints(tmp_path, 1)
    path = tmp_path / CHECKPOINT_DIR / "000001-rank0.json"
    text, problem = MALFORMED[case]
    if case == "a string rank":
        text = json.dumps({**json.loads(path.read_text()), "rank": "0"})
    elif case == "another rank's":
        text = json.dumps({**json.loads(path.read_text()), "rank": 3, "group": [3]})
    path.write_text(text)
    line = (
        f"{path}: not a checkpoint description ({problem}); "
        "delete it and 000001-rank0.pt, and --resume continues from the checkpoint before"
    )
    with pytest.raises(CheckpointError) as error:
        resume_plan(tmp_path, run)
    assert str(error.value) == line
    record = finalize_record(run, tmp_path, ["mpirun", "python"], 1, 2.0)  # what suite run does after the worker failed
    assert record.status == "failed" and record.checkpoint is None
    assert record.error.splitlines()[1] == f"--resume cannot continue: {line}"
    assert read_record(tmp_path).error == record.error


# --- generators -------------------------------------------------------------------------------------------------


def tiny_bundle():
    from suite.gan.models import Generator
    from suite.gan.sampling import GeneratorBundle

    torch.manual_seed(0)
    state = {k: v.clone() for k, v in Generator(20, 1, 4, 0).state_dict().items()}
    return GeneratorBundle("single", 20, 1, 4, 10, False, {"all": state}, {0: 1.0})


def test_safeload_a_generator_is_recorded_with_its_sha256_and_sampled_after_the_check(tmp_path, capsys):
    written = tiny_bundle().save(tmp_path / "generator.pt")
    assert written == digest_file(tmp_path / "generator.pt")
    write_record(tmp_path, new_record({"run_id": "r", "status": "ok", "model_files": {"generator.pt": vars(written)}}))
    assert main(["sample", str(tmp_path), "--n", "3", "--out", str(tmp_path / "s.npz")]) == 0
    data = (tmp_path / "generator.pt").read_bytes()
    (tmp_path / "generator.pt").write_bytes(data[:-10] + bytes(10))  # damaged, the same size
    capsys.readouterr()
    assert main(["sample", str(tmp_path), "--n", "3", "--out", str(tmp_path / "t.npz")]) == 2
    actual = hashlib.sha256((tmp_path / "generator.pt").read_bytes()).hexdigest()
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'generator.pt'}: has sha256 {actual[:12]}..., {written.sha256[:12]}... was written "
        "(damaged or replaced); nothing was loaded from it\n"
    )
    assert not (tmp_path / "t.npz").exists()


@pytest.mark.parametrize("recorded", ["its sha256", "no record"])
@pytest.mark.parametrize("form", FORMS)
def test_safeload_a_pickle_bomb_as_generator_is_refused_by_sample_and_score(tmp_path, marker, capsys, form, recorded):
    path = tmp_path / "generator.pt"
    write_bomb(path, marker, form)
    if recorded == "its sha256":  # a crafted run folder whose record vouches for the bomb
        write_record(
            tmp_path, new_record({"run_id": "r", "status": "ok", "model_files": {"generator.pt": vars(digest_file(path))}})
        )
    for command in (["sample", str(tmp_path), "--out", str(tmp_path / "s.npz")], ["score", "--run", str(tmp_path)]):
        assert main(command) == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"error: {refusal(path, 'generator bundle', form)}"
    assert not marker.exists() and not (tmp_path / "s.npz").exists()


@pytest.mark.parametrize("form", FORMS)
def test_safeload_a_pickle_bomb_as_class_generator_is_refused_in_one_line(tmp_path, marker, form):
    path = tmp_path / "class3.pt"
    write_bomb(path, marker, form)
    with pytest.raises((UnsafeFileError, UnreadableFileError)) as refused:
        _load_classes(tmp_path, [3], {3: digest_file(path)})
    assert str(refused.value) == refusal(path, "class generator", form)
    assert not marker.exists()


def test_safeload_a_class_generator_other_than_its_writer_sent_is_refused(tmp_path, marker):
    written = save_tensors({"label": 3, "state": {"w": torch.ones(2)}}, tmp_path / "class3.pt")
    write_bomb(tmp_path / "class3.pt", marker, "torch.save")  # replaced after its writer sent the digest
    with pytest.raises(IntegrityError, match=r"class3\.pt: has \d+ bytes, \d+ were written") as refused:
        _load_classes(tmp_path, [3], {3: written})
    assert "\n" not in str(refused.value) and not marker.exists()
    assert _load_classes(tmp_path, [4], {4: save_tensors({"label": 4}, tmp_path / "class4.pt")}) == [{"label": 4}]


# --- real runs: a damaged checkpoint costs a checkpoint, a malformed one its run, never the sweep -----------------

# Three repeats of one run, 6 generator steps with a checkpoint every 2; rank 0 fails after its 5th step,
# leaving checkpoints 1 (step 2) and 2 (step 4) of every repeat.
SCENARIO = {
    **tiny_scenario(
        "damaged",
        [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}],
        train={"steps": 6, "epochs": 2, "batch_size": 16, "threads": 1, "checkpoint_every": {"steps": 2}},
    ),
    "repeats": 3,
}
RUN = "data_parallel-bce-mpi-p1-r{}"


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """(the results of SCENARIO's interrupted runs, the first repeat's record when not interrupted)."""
    folder = tmp_path_factory.mktemp("damaged")
    (folder / "uninterrupted").mkdir()
    code, reference = run_scenario(folder / "uninterrupted", SCENARIO, "--only", RUN.format(0))
    assert code == 0, reference
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SUITE_TEST_FAIL_AT_STEP", "5")
        env.setenv("SUITE_TEST_FAIL_RANK", "0")
        code, records = run_scenario(folder, SCENARIO)
    assert code == 1 and all(r["checkpoint"]["index"] == 2 for r in records.values()), records
    return folder / "results", reference[RUN.format(0)]


def copy_results(interrupted, tmp_path: Path) -> Path:
    shutil.copytree(interrupted[0], tmp_path / "results")
    (tmp_path / "results" / ".suite.lock").unlink(missing_ok=True)
    return tmp_path / "results"


@pytest.mark.multiproc
def test_safeload_resume_skips_a_truncated_newest_checkpoint_and_continues_from_the_one_before(interrupted, tmp_path, caplog):
    results = copy_results(interrupted, tmp_path)
    pt = results / RUN.format(0) / CHECKPOINT_DIR / "000002-rank0.pt"
    size = pt.stat().st_size
    pt.write_bytes(pt.read_bytes()[: size // 2])
    caplog.set_level("INFO", logger="suite")
    code, records = run_scenario(tmp_path, SCENARIO, "--only", RUN.format(0), "--resume")
    record, skipped = (
        records[RUN.format(0)],
        f"checkpoint 2: 000002-rank0.pt has {size // 2} bytes, {size} were written (truncated or damaged)",
    )
    assert code == 0 and record["status"] == "ok"
    assert record["resumed_from"]["index"] == 1 and record["resumed_from"]["step"] == 2
    assert record["checkpoints_skipped"] == [skipped] and [s["from_step"] for s in record["segments"]] == [0, 2]
    assert record["model_digest"] == interrupted[1]["model_digest"]  # the uninterrupted run's generator, bit for bit
    assert f"{RUN.format(0)}: skipped {skipped}; continued from checkpoint 1" in caplog.messages
    assert f"skipped {skipped}" in (results / RUN.format(0) / "log.txt").read_text()
    written = record["model_files"]["generator.pt"]
    assert written == vars(digest_file(results / RUN.format(0) / "generator.pt"))


@pytest.mark.multiproc
def test_safeload_a_malformed_description_or_a_bomb_ends_its_run_in_one_line_and_the_sweep_goes_on(interrupted, tmp_path, marker):
    results = copy_results(interrupted, tmp_path)
    emptied = results / RUN.format(0) / CHECKPOINT_DIR / "000002-rank0.json"
    emptied.write_text("{}")
    bomb = results / RUN.format(1) / CHECKPOINT_DIR / "000002-rank0.pt"
    write_bomb(bomb, marker, "torch.save")
    describe_as_written(bomb)
    code, records = run_scenario(tmp_path, SCENARIO, "--resume")
    assert code == 1 and not marker.exists()
    first, second, third = (records[RUN.format(i)] for i in range(3))
    line = (
        f"{emptied}: not a checkpoint description ("
        + "; ".join(f"{field}: required field is missing" for field in MARK_FIELDS)
        + "); "
        "delete it and 000002-rank0.pt, and --resume continues from the checkpoint before"
    )
    assert first["status"] == "failed" and first["error"].splitlines()[:2] == [
        f"rank 0 on {HOST} exited with code 1: CheckpointError: {line}",
        f"--resume cannot continue: {line}",
    ]
    assert second["status"] == "failed" and second["error"].splitlines()[0] == (
        f"rank 0 on {HOST} exited with code 1: UnsafeFileError: {refusal(bomb, 'checkpoint', 'torch.save')}; "
        f"delete {bomb.parent} to start the run again from step 0"
    )
    assert third["status"] == "ok" and third["resumed_from"]["index"] == 2  # the sweep went on
