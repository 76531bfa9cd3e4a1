"""Races on a shared folder (issue 52, holes 1-9) and reruns: each swap made by a hook at the exact moment it matters.

A results, report, jobs, tuning or papers folder that someone else can write lets them swap what is in it for a link
between the suite's look and its use: a run folder mid-run, a report's staging folder, a sample grid between its check
and its copy. The suite works only in folders nobody else can change (``suite.records.nofollow``: checked on the
opened descriptor, refused in one line naming the folder and the fix), makes every folder and file of its own without
group or other write, holds the descriptors it walks from, and copies from a descriptor it checked. Each test below
performs the swap with a hook at the point named (never a timing loop), then checks the outcome: the exit code, the one
line, the victim's files by sha256, and that nothing was written outside the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import stat
from pathlib import Path

import pytest
import yaml
from test_hostile_folders import _one_record, fingerprint, outside, scenario_file, victim

from conftest import tiny_scenario
from suite.cli import main
from suite.records import nofollow, results
from suite.records.nofollow import UnsafeEntry, confine, open_regular, output_folder
from suite.records.results import (
    LOCK_FILE,
    StagingReplaced,
    atomic_write_text,
    read_record,
    staged_folder,
    write_record,
)
from suite.records.trusted import trusted_records
from suite.records.unsafe import SharedFolder
from suite.running.commands import RUN_DIGEST_OPTION

RUN_ID = "data_parallel-bce-torch-p1-r0"
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def shared(folder: Path, mode: int = 0o777) -> Path:
    """``folder``, made and opened to its group and others (``mode``, umask aside)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(mode)
    return folder


def refused_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr (no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def swap_for_link(path: Path, target: Path) -> Path:
    """Rename ``path`` aside and put a link to ``target`` in its place (what someone who can write its folder does);
    return where the original went."""
    moved = path.with_name(path.name + ".moved")
    path.rename(moved)
    path.symlink_to(target)
    return moved


# --- hole 1: the run folder swapped for a link mid-run ------------------------------------------------------------


def test_a_results_folder_others_can_write_is_refused_before_anything_is_written(tmp_path, capsys):
    home, out, path = victim(tmp_path), shared(tmp_path / "results"), scenario_file(tmp_path)
    before, others = fingerprint(home), outside(tmp_path, out)
    assert main(["run", str(path), "--out", str(out)]) == 2
    assert refused_line(capsys) == (
        f"error: {out}: writable by its group and others (mode 777) without the sticky bit: anyone who can write it "
        f"could swap a file or folder in it for a link while the suite works there; run `chmod g-w,o-w {out}` "
        f"(or `chmod +t {out}`) or choose another --out"
    )
    assert list(out.iterdir()) == [] and fingerprint(home) == before and outside(tmp_path, out) == others


def test_a_sticky_shared_results_folder_is_accepted(tmp_path, capsys):
    out = shared(tmp_path / "results", 0o1777)  # like /tmp: others cannot rename or remove what is not theirs
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 0
    assert (out / RUN_ID / "run.json").is_file()


def test_a_run_folder_of_someone_else_is_refused(tmp_path, capsys):
    out = tmp_path / "results"
    (out / RUN_ID).mkdir(parents=True)
    os.chown(out / RUN_ID, 4242, -1)  # the tests run as root: a folder another user owns
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 2
    assert refused_line(capsys).startswith(f"error: {out / RUN_ID}: owned by user 4242, not by you")
    assert not (out / RUN_ID / "run.json").exists()


def test_the_worker_refuses_a_run_folder_in_a_folder_others_can_write(tmp_path, capsys):
    from suite.running import worker

    out = tmp_path / "results"
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 0
    capsys.readouterr()
    shared(out)  # after suite run wrote run.json: someone could now swap the run folder before the rank opens it
    assert worker.main([str(out / RUN_ID)]) == 2
    assert refused_line(capsys).startswith(f"error: {out}: writable by its group and others (mode 777)")
    assert sorted(p.name for p in (out / RUN_ID).iterdir()) == ["run.json"]  # no ranks/, no record


def test_a_run_folder_swapped_after_the_rank_opened_it_gets_nothing_of_the_run(tmp_path):
    """The rank's writes, removals and folders go through the descriptor it opened: a link put at the run folder's
    name after that (by its owner: nobody else can) receives nothing, and nothing of it is removed."""
    home, run_dir = victim(tmp_path), tmp_path / "results" / RUN_ID
    (run_dir / "checkpoints").mkdir(parents=True)
    (home / "checkpoints").mkdir()
    (home / "checkpoints" / "000001-rank0.pt").write_bytes(b"theirs")
    before = fingerprint(home)
    moved: list[Path] = []

    def swap(path: Path, fd: int) -> None:
        if path == run_dir and not moved:
            moved.append(swap_for_link(run_dir, home))

    nofollow.OPENED.append(swap)
    try:
        with confine(run_dir):
            assert moved  # swapped the moment the rank opened its folder
            atomic_write_text(run_dir / "result.json", "{}")
            atomic_write_text(run_dir / "ranks" / "rank0.json", "{}")
            atomic_write_text(run_dir / "samples" / "real.png", "png")
            nofollow.remove_files(run_dir / "checkpoints", lambda name: True)
            nofollow.remove_tree(run_dir / "checkpoints")
    finally:
        nofollow.OPENED.remove(swap)
    assert fingerprint(home) == before
    assert sorted(p.name for p in moved[0].iterdir()) == ["ranks", "result.json", "samples"]


# --- hole 2: the report's staging folder swapped for a link --------------------------------------------------------


@contextlib.contextmanager
def staging_swapped_for(target: Path):
    """A hook: every staging folder, the moment :func:`staged_folder` made it, renamed aside and a link to ``target``
    put in its place; yields the list of the originals."""
    moved: list[Path] = []

    def swap(staging: Path) -> None:
        moved.append(swap_for_link(staging, target))

    results.STAGED.append(swap)
    try:
        yield moved
    finally:
        results.STAGED.remove(swap)


def test_a_staging_folder_swapped_for_a_link_moves_nothing_and_writes_nothing_there(tmp_path):
    home, report = victim(tmp_path), tmp_path / "results" / "report"
    report.parent.mkdir()
    before = fingerprint(home)
    with staging_swapped_for(home) as moved, pytest.raises(StagingReplaced, match="was replaced while it was written"):
        with staged_folder(report) as staging:
            atomic_write_text(staging / "report.md", "# report\n")
            atomic_write_text(staging / "details" / "runs.md", "runs\n")
    assert moved and fingerprint(home) == before
    assert sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]
    assert not report.exists() or list(report.iterdir()) == []  # nothing of the victim's moved into the report


def test_suite_report_with_its_staging_folder_swapped_exits_2_and_leaves_the_target(tmp_path, capsys):
    home, out = victim(tmp_path), tmp_path / "results"
    _one_record(out)
    before = fingerprint(home)
    with staging_swapped_for(home) as moved:
        assert main(["report", str(out)]) == 2
    assert moved and "the staging folder of" in refused_line(capsys)
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]
    assert not (out / "report" / ".bashrc").exists() and not (out / "report" / ".netrc").exists()


def test_a_staging_folder_is_never_made_where_others_can_write(tmp_path, capsys):
    home, out = victim(tmp_path), tmp_path / "results"
    _one_record(out)
    shared(out)
    with staging_swapped_for(home) as moved:
        assert main(["report", str(out)]) == 2
        with pytest.raises(SharedFolder, match="writable by its group and others"), staged_folder(out / "projection"):
            pass
    assert refused_line(capsys).startswith(f"error: {out}: writable by its group and others")
    assert moved == [] and not (out / "report").exists() and not (out / "projection").exists()


def test_a_staging_folder_is_made_0700(tmp_path):
    seen: list[int] = []
    with staging_swapped_for(tmp_path / "nowhere") as _:
        pass
    with staged_folder(tmp_path / "report") as staging:
        seen.append(stat.S_IMODE(staging.stat().st_mode))
    assert seen == [0o700]


# --- hole 3: check, then copy ---------------------------------------------------------------------------------------


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010800000000"
    "3a7e9b550000000a49444154789c6360000000020001e221bc330000000049454e44ae426082"
)


def _run_with_samples(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "results"
    _one_record(out)
    (out / "dp-p1-r0" / "samples.png").write_bytes(PNG)
    key = tmp_path / "victim-ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text(KEY)
    return out, key


@pytest.mark.parametrize("how", ["symbolic", "hard"])
def test_a_sample_grid_swapped_between_its_check_and_its_copy_is_not_copied(tmp_path, caplog, monkeypatch, how):
    from suite.analysis.report import writer

    out, key = _run_with_samples(tmp_path)
    original, swapped = writer.copy_regular, []

    def swap_then_copy(source, target, signature=b""):
        source = Path(source)
        source.unlink()  # checked as a PNG a moment ago; now a link to someone's key
        source.symlink_to(key) if how == "symbolic" else os.link(key, source)
        swapped.append(source)
        return original(source, target, signature)

    monkeypatch.setattr(writer, "copy_regular", swap_then_copy)
    assert main(["report", str(out)]) == 0  # named and not copied; the report of the rest goes on (issue 61)
    what = "a symbolic link" if how == "symbolic" else "a hard link (one of 2 names of one file)"
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"skipped {swapped[0]}")]
    assert line.startswith(f"skipped {swapped[0]}: {what}") and line.endswith("samples/dp-p1-r0.png is not in the report")
    assert not (out / "report" / "samples" / "dp-p1-r0.png").exists()
    assert not any(
        KEY in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and not p.is_symlink() and p != swapped[0]
    )
    assert key.read_text() == KEY


def test_a_copy_checks_what_it_opened_is_what_the_suite_wrote(tmp_path):
    source = tmp_path / "samples.png"
    source.write_text(KEY)  # a regular file of one link, but no PNG
    with pytest.raises(UnsafeEntry, match="not the file the suite wrote there"), open(tmp_path / "copy", "wb") as handle:
        nofollow.copy_regular(source, handle, b"\x89PNG\r\n\x1a\n")


# --- hole 4: run.json between the launcher's write and the rank's read -----------------------------------------------


def test_every_folder_and_file_of_a_run_is_the_owners_alone_whatever_the_umask(tmp_path, capsys):
    out = tmp_path / "results"
    old = os.umask(0o002)  # a umask that would leave them group-writable
    try:
        assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 0
    finally:
        os.umask(old)
    for path in (out, out / RUN_ID, out / RUN_ID / "run.json", out / "scenario.yaml"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o022 == 0, path


def _rewritten(run_dir: Path, lr: float) -> None:
    """``run.json`` rewritten with another learning rate (still a valid run): what someone who could write the run
    folder between the launcher's write and the rank's read would do."""
    path = run_dir / "run.json"
    data = json.loads(path.read_text())
    data["train"]["lr"] = lr
    path.write_text(json.dumps(data, indent=2))


def _digest_of(command: list[str] | str) -> str:
    words = shlex.split(command) if isinstance(command, str) else command
    assert words[-2] == RUN_DIGEST_OPTION, words  # the worker's last words: the sha256 of the run.json written
    return words[-1]


def test_a_run_json_changed_between_the_launchers_write_and_the_ranks_read_is_refused(tmp_path, capsys):
    """The rank reads run.json once and hashes those bytes: another file than the one suite run wrote (whose sha256
    the launch command gives it) is refused in one line naming the file, with its failed status written (which names
    that line in suite run's failed record), before anything is parsed or trained. The rewrite is made between the
    write (a dry run) and the read (the worker's entry, in-process), not by a timing loop."""
    from suite.running import run_file, worker

    out = tmp_path / "results"
    run_dir = out / RUN_ID
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 0
    written = hashlib.sha256((run_dir / "run.json").read_bytes()).hexdigest()
    assert _digest_of(capsys.readouterr().out.strip()) == written  # the dry run's command gives the rank the digest
    with confine(run_dir):
        assert run_file.read_run(run_dir, written).train.lr != 0.123  # the file as written: accepted
    _rewritten(run_dir, 0.123)
    changed = hashlib.sha256((run_dir / "run.json").read_bytes()).hexdigest()
    line = (
        f"{run_dir / 'run.json'} changed after suite run wrote it (sha256 {changed}, expected {written}): it is not the "
        "run that was launched, so nothing was run; run `suite run` again to write it anew (a worker started by hand "
        "without --run-sha256 runs the file as it is)"
    )
    with confine(run_dir), pytest.raises(run_file.RunFileChanged) as refused:
        run_file.read_run(run_dir, written)
    assert str(refused.value) == line
    assert worker.main([str(run_dir), "--run-sha256", written]) == 2
    assert refused_line(capsys) == f"error: {line}"
    status = json.loads((run_dir / "ranks" / "rank0.json").read_text())
    assert (status["status"], status["error"]) == ("failed", line)
    assert sorted(p.name for p in run_dir.iterdir()) == ["ranks", "run.json"]  # nothing else: no record, no model
    # a hand launch (no --run-sha256) runs the run.json it finds: nothing to compare it with
    with confine(run_dir):
        assert run_file.read_run(run_dir).train.lr == 0.123
    with pytest.raises(SystemExit) as usage:  # not a sha256: argparse's usage and one line
        worker.main([str(run_dir), "--run-sha256", "xyz"])
    assert usage.value.code == 2 and "expected a sha256 of 64 hexadecimal digits" in capsys.readouterr().err


@pytest.mark.multiproc
def test_a_real_rank_refuses_a_run_json_changed_before_the_launch(tmp_path, monkeypatch):
    """A real launch (torchrun, one rank) with run.json rewritten after suite run wrote it and before the launch: the
    rank refuses it (exit code 2) and the run's failed record names the file in its first line, without a traceback.
    The normal path, the digest given and accepted, is the first real run of the rerun test below."""
    from suite.running import launch as launching

    path, out = scenario_file(tmp_path), tmp_path / "results"
    real_launch, written = launching.launch, []

    def rewrite_then_launch(planned, opts, **kwargs):
        written.append(planned.run_digest)
        _rewritten(planned.run_dir, 0.123)
        return real_launch(planned, opts, **kwargs)

    monkeypatch.setattr(launching, "launch", rewrite_then_launch)
    assert main(["run", str(path), "--out", str(out), "-q", "--timeout", "600"]) == 1
    failed = read_record(out / RUN_ID)
    assert failed is not None and failed.status == "failed" and failed.command is not None
    assert _digest_of(failed.command) == written[0] != hashlib.sha256((out / RUN_ID / "run.json").read_bytes()).hexdigest()
    first = (failed.error or "").splitlines()[0]
    assert first.startswith("rank 0 on ") and " exited with code 2: " in first
    assert first.endswith(
        f"{out / RUN_ID / 'run.json'} changed after suite run wrote it (sha256 "
        f"{hashlib.sha256((out / RUN_ID / 'run.json').read_bytes()).hexdigest()}, expected {written[0]}): it is not the "
        "run that was launched, so nothing was run; run `suite run` again to write it anew (a worker started by hand "
        "without --run-sha256 runs the file as it is)"
    )
    assert "Traceback" not in (failed.error or "") and not (out / RUN_ID / "generator.pt").exists()


# --- holes 6 and 7: suite tune's and suite papers' folders ---------------------------------------------------------


def test_a_link_at_the_tuning_folder_is_refused(tmp_path):
    home, out = victim(tmp_path), tmp_path / "results"
    out.mkdir()
    (out / "tuning").symlink_to(home)
    before = fingerprint(home)
    with pytest.raises(UnsafeEntry, match="tuning: a symbolic link"), output_folder(out / "tuning"):
        pass
    assert fingerprint(home) == before


def test_suite_papers_never_writes_through_a_link_at_a_papers_folder(tmp_path, capsys, monkeypatch):
    from suite.analysis.report import DEFAULT_BASELINES, paper_pages

    home, pp = victim(tmp_path), tmp_path / "pp"
    pp.mkdir()
    (pp / "paper000").symlink_to(home)
    monkeypatch.setattr(paper_pages, "collect", lambda folders: {"paper000": []})
    before = fingerprint(home)
    with pytest.raises(UnsafeEntry, match="paper000: a symbolic link"):
        paper_pages.write_papers([tmp_path], pp, DEFAULT_BASELINES)
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]


def test_a_tuning_folder_swapped_after_it_was_opened_gets_nothing(tmp_path):
    home, tuning = victim(tmp_path), tmp_path / "results" / "tuning"
    tuning.parent.mkdir()
    before, moved = fingerprint(home), []

    def swap(path: Path, fd: int) -> None:
        if path.name == "tuning" and not moved:
            moved.append(swap_for_link(tuning, home))

    nofollow.OPENED.append(swap)
    try:
        with output_folder(tuning):
            atomic_write_text(tuning / "tuning.md", "tuned\n")
    finally:
        nofollow.OPENED.remove(swap)
    assert fingerprint(home) == before and (moved[0] / "tuning.md").read_text() == "tuned\n"


# --- hole 8: hard links where the suite truncates or appends ---------------------------------------------------------


@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_APPEND], ids=["trunc", "append"])
def test_a_hard_link_is_never_truncated_or_appended_to(tmp_path, flags):
    home = victim(tmp_path)
    log = tmp_path / "results" / "log.txt"
    log.parent.mkdir()
    os.link(home / ".netrc", log)
    before = fingerprint(home)
    with pytest.raises(UnsafeEntry, match=r"log.txt: a hard link \(one of 2 names of one file\)"):
        open_regular(log, flags)
    assert fingerprint(home) == before


def test_a_hard_link_at_the_lock_file_is_refused(tmp_path, capsys):
    home, out = victim(tmp_path), tmp_path / "results"
    out.mkdir()
    os.link(home / ".bashrc", out / LOCK_FILE)
    before = fingerprint(home)
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run"]) == 2
    assert refused_line(capsys).startswith(f"error: {out / LOCK_FILE}: a hard link")
    assert fingerprint(home) == before


# --- hole 9: a scenario's download folder ----------------------------------------------------------------------------


def _downloading(tmp_path: Path, root: Path) -> Path:
    path = tmp_path / "dl.yaml"
    runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}]
    scenario = tiny_scenario("dl", runs, dataset={"name": "mnist", "root": str(root), "download": True})
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_a_scenario_cannot_download_outside_the_results_folder(tmp_path, capsys):
    elsewhere, out = tmp_path / "elsewhere" / "data", tmp_path / "results"
    assert main(["run", str(_downloading(tmp_path, elsewhere)), "--out", str(out), "--dry-run"]) == 2
    line = refused_line(capsys)
    assert line.startswith(f"error: data_parallel-bce-torch-p1-r0: dataset.root {elsewhere} with download: true")
    assert f"--set dataset.root={elsewhere}" in line
    assert not (tmp_path / "elsewhere").exists() and not out.exists()


def test_a_download_folder_given_on_the_command_line_is_the_users_choice(tmp_path, capsys):
    elsewhere, out = tmp_path / "elsewhere" / "data", tmp_path / "results"
    path = _downloading(tmp_path, elsewhere)
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--set", f"dataset.root={elsewhere}"]) == 0
    inside = _downloading(tmp_path, out / "data")
    assert main(["run", str(inside), "--out", str(out), "--dry-run"]) == 0


# --- the folder checks themselves ------------------------------------------------------------------------------------


def test_a_shared_folder_is_refused_on_its_descriptor_not_its_name(tmp_path):
    folder = shared(tmp_path / "f", 0o770)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        folder.chmod(0o755)  # the name now says private; the descriptor is what was opened
        folder.rename(tmp_path / "g")
        shared(tmp_path / "f", 0o755)
        (tmp_path / "g").chmod(0o770)
        with pytest.raises(SharedFolder, match=r"writable by its group \(mode 770\)"):
            nofollow.check_private(fd, folder)
    finally:
        os.close(fd)


# --- a rerun never replaces a finished run unasked -------------------------------------------------------------------


@pytest.mark.multiproc
def test_a_rerun_skips_finished_runs_and_rerun_keeps_the_old_one_until_the_new_is_ok(tmp_path, caplog, capsys, monkeypatch):
    import dataclasses
    import logging

    from suite.running import launch as launching

    caplog.set_level(logging.INFO, logger="suite")
    path, out = scenario_file(tmp_path), tmp_path / "results"
    assert main(["run", str(path), "--out", str(out), "-q", "--timeout", "600"]) == 0
    first = read_record(out / RUN_ID)
    assert first is not None and first.status == "ok" and first.command is not None
    # the rank was given the sha256 of the run.json suite run wrote, and accepted it (issue 52, hole 4)
    assert _digest_of(first.command) == hashlib.sha256((out / RUN_ID / "run.json").read_bytes()).hexdigest()
    # again, without --rerun (with and without --resume): skipped, saying so; the record is the same
    for extra in ([], ["--resume"]):
        caplog.clear()
        assert main(["run", str(path), "--out", str(out), "-q", *extra]) == 0
        assert f"{RUN_ID} finished (ok); skipped: --rerun trains it again" in caplog.text
        assert read_record(out / RUN_ID) == first
    # --rerun: while the new run trains, the old folder is kept aside; removed once the new is ok, kept if it fails
    seen: list[list[str]] = []
    status = "ok"

    def fake_launch(planned, opts, **kwargs):
        seen.append(sorted(p.name for p in out.iterdir() if ".replaced-" in p.name))
        assert sorted(p.name for p in planned.run_dir.iterdir()) == ["run.json"]  # a fresh folder
        record = dataclasses.replace(first, status=status, error=None if status == "ok" else "failed")
        write_record(planned.run_dir, record)
        return record

    monkeypatch.setattr(launching, "launch", fake_launch)
    caplog.clear()
    assert main(["run", str(path), "--out", str(out), "-q", "--rerun"]) == 0
    assert f"{RUN_ID}: the run it replaces is removed" in caplog.text
    assert len(seen[0]) == 1 and seen[0][0].startswith(f"{RUN_ID}.replaced-")
    assert not [p for p in out.iterdir() if ".replaced-" in p.name]
    status = "failed"
    caplog.clear()
    assert main(["run", str(path), "--out", str(out), "-q", "--rerun"]) == 1
    assert len(seen[1]) == 1
    assert f"{RUN_ID}: the finished run it was to replace is kept in {out / seen[1][0]}" in caplog.text
    assert sorted(p.name for p in out.iterdir() if ".replaced-" in p.name) == seen[1]
    assert [r.run_id for r in results.iter_records(out)] == [RUN_ID]  # readers pass over a folder set aside
    # the next plain command puts the kept run back (issue 61): the failed new run is removed, the finished one skipped
    caplog.clear()
    assert main(["run", str(path), "--out", str(out), "-q"]) == 0
    assert f"{RUN_ID}: put back the finished run that a stopped --rerun had set aside in {out / seen[1][0]}" in caplog.text
    assert f"{RUN_ID} finished (ok); skipped" in caplog.text and read_record(out / RUN_ID) == first
    assert not [p for p in out.iterdir() if ".replaced-" in p.name]
    # a --rerun stopped by SIGTERM midway: the stop names where the old run is, reports read it from there
    import signal

    def stopped_launch(planned, opts, **kwargs):
        write_record(planned.run_dir, dataclasses.replace(first, status="interrupted", error="interrupted by SIGTERM"))
        raise launching.Stop(signal.SIGTERM)

    monkeypatch.setattr(launching, "launch", stopped_launch)
    assert main(["run", str(path), "--out", str(out), "-q", "--rerun"]) == 128 + signal.SIGTERM
    (aside,) = [p for p in out.iterdir() if ".replaced-" in p.name]
    said = capsys.readouterr().err
    assert f"the finished run it was to replace is kept in {aside}; the next `suite run` puts it back" in said
    assert trusted_records(out).records == [first] and trusted_records(out).set_aside
    caplog.clear()
    assert main(["run", str(path), "--out", str(out), "-q"]) == 0
    assert f"put back the finished run that a stopped --rerun had set aside in {aside}" in caplog.text
    assert read_record(out / RUN_ID) == first and not aside.exists()
