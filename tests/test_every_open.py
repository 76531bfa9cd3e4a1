"""A link or FIFO planted at every path a command opens, at the moment it opens it (issue 52, the property test).

The suite opens and makes what lies below its output folders only through the primitives of
``suite.records.nofollow`` and ``suite.records.results`` (a folder walked to, a folder opened by its name, a file
opened, a file an atomic write or a report's move puts in place, a staging folder), and each calls the test hook
``nofollow.OPENING`` with the path just before it opens or makes it. Each case here runs one command in-process on a
small fixture twice over: once to list, in order, the distinct paths below the output folder it opens (the
discovery), then again with a hook that, the first time the n-th of those paths is opened, puts in its place (the
original moved aside, where there was one) a symbolic link to a canary outside the output folder (a folder holding a
``.bashrc`` and a ``.netrc`` for a folder, that ``.netrc`` for a file) or a FIFO. Whatever the path, the command:

- ends with its usual exit code (the link was replaced, or never followed), or ends with one ``error:`` line naming
  the path it refused (exit code 2; 1 where ``suite run`` meets it in a launch, whose sweep stops);
- prints no traceback and never blocks (a case is failed after 60 s);
- leaves the canary as it was (every file by sha256, no entry added) and copies nothing of it into the output folder;
- writes nothing outside the output folder (the names outside it, and the inputs by sha256, are as they were).

Commands and paths covered, both kinds (link, FIFO) each:

- ``run``: the in-process part of ``suite run`` (no training): the results folder's lock, ``scenario.yaml``, each
  run folder, ``run.json``, ``log.txt``, ``checkpoints/``, ``ranks/`` (and the launch's part handed to the ranks in it),
  ``partial/`` and the launcher's ``result.json``, with the launch command replaced by ``true`` (the launcher then writes a failed record: its
  usual exit code is 1). Every path. The ranks' own opens (the worker in another process) are not planted here;
  ``tests/test_races.py`` covers their run folder (its descriptor held) and ``run.json`` (its digest).
- ``report`` (three records of ``reports/digits/records.json`` as a results folder, ``--out`` a new folder):
  every folder it opens (the staging folder, its ``details/``, the report folder and its ``details/``) and 6 of
  its about 80 files, evenly spaced in the order they are opened, the first and last included (the staging
  folder's, each written by one atomic write, then the report folder's, each put in place by one move): a report
  takes one to four seconds on this shared 2-core machine, and all its paths would take ten minutes.
- ``tune`` (``reports/digits/records.json``), ``papers`` (``reports/papers``), ``project`` (the report's three
  records), ``sample`` (a run folder holding a tiny generator) and ``jobscript`` (a tiny scenario,
  ``--site slurm-gpu``): every path.

The output folder's own parent (``--out``'s parent, and for ``suite run`` ``--out`` itself) is the user's choice
and may be a link (docs/reliability.md); it is not planted. Inputs (the records read, the scenario, the
generator) are read as their readers read them, checked for what they hold rather than refused as links, and are
not planted either.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml
from test_hostile_files import tiny_bundle
from test_hostile_folders import fingerprint, outside, victim

from conftest import REPO, tiny_scenario
from suite.cli import main
from suite.records import nofollow
from suite.records.results import new_record, read_records, write_record

DIGITS = REPO / "reports" / "digits" / "records.json"
SLOTS = {"run": 10, "report": 10, "tune": 4, "papers": 9, "project": 9, "sample": 1, "jobscript": 2}
"""Cases per command: one per path it opens, or for ``report`` its folders and as many of its files as the slots
leave, evenly spaced; ``test_every_path_of_each_command_has_a_case`` fails when a command opens more paths than it
has slots (a case past the paths a command opens is skipped)."""
SAMPLED = {"report"}
MARKER = b"hunter2"
"""In the canary's ``.netrc`` (:func:`test_hostile_folders.victim`): found in an output file, the canary was read
through a link."""
LIMIT_S = 60
_STAGING = re.compile(r"(?<=/)\.([^/]+)\.[0-9a-f]{8}(?=/|$)")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The commands' inputs, read-only for every case: three records as a results folder, a tiny scenario, a run
    folder with a tiny generator."""
    folder = tmp_path_factory.mktemp("inputs")
    for record in read_records(DIGITS)[:3]:
        write_record(folder / "results" / record.run_id, record)
    runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}]
    (folder / "s.yaml").write_text(yaml.safe_dump(tiny_scenario("s", runs)))
    written = tiny_bundle().save(folder / "run" / "generator.pt")
    write_record(folder / "run", new_record({"run_id": "r", "status": "ok", "model_files": {"generator.pt": vars(written)}}))
    return folder


def command_line(command: str, inputs: Path, work: Path) -> tuple[list[str], Path]:
    """``command``'s arguments writing below ``work``, and its output folder (below which paths are planted)."""
    lines = {
        "run": ["run", str(inputs / "s.yaml"), "--out", str(work / "results"), "-q"],
        "report": ["report", str(inputs / "results"), "--out", str(work / "report")],
        "tune": ["tune", str(DIGITS), "--out", str(work / "tuning")],
        "papers": ["papers", str(REPO / "reports" / "papers"), "--out", str(work / "papers")],
        "project": ["project", str(inputs / "results"), "--out", str(work / "projection")],
        "sample": ["sample", str(inputs / "run"), "--n", "4", "--out", str(work / "samples.npz")],
        "jobscript": [
            "jobscript",
            str(inputs / "s.yaml"),
            "--site",
            "slurm-gpu",
            "--venv",
            "venv",
            "--out",
            str(work / "jobs" / "s.sh"),
        ],
    }
    work.mkdir(mode=0o755)
    if command == "run":  # suite run's --out is the user's choice and may be a link: the folders below it are not
        (work / "results").mkdir(mode=0o755)
        return lines[command], work / "results"
    return lines[command], work


def generic(path: Path, root: Path) -> str:
    """``path`` below ``root``, a staging folder's random part as ``*`` (the same path in every case)."""
    return _STAGING.sub(lambda m: f".{m[1]}.*", "/" + str(path.relative_to(root)))[1:]


@contextlib.contextmanager
def opening(hook: Callable[[Path, str], None]) -> Iterator[None]:
    nofollow.OPENING.append(hook)
    try:
        yield
    finally:
        nofollow.OPENING.remove(hook)


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """A command that blocks (on a FIFO) fails the case instead of hanging the tests."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """``suite run`` in-process without training: the launch command is ``true``, and no watchdog process."""
    real = subprocess.Popen

    def popen(command, *args, **kwargs):
        is_launch = isinstance(command, list) and "suite.running.worker" in command
        return real(["true"] if is_launch else command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr("suite.running.reaper.Reaper", contextlib.nullcontext)


_DISCOVERED: dict[str, tuple[int, list[tuple[str, str]]]] = {}


def discovered(command: str, inputs: Path, work: Path) -> tuple[int, list[tuple[str, str]]]:
    """``command``'s exit code and the distinct paths below its output folder it opens, in order, with what it meant
    to find there; run once per command (in ``work``) and kept."""
    if command not in _DISCOVERED:
        argv, root = command_line(command, inputs, work)
        paths: list[tuple[str, str]] = []

        def record(path: Path, what: str) -> None:
            if root in path.parents and (generic(path, root), what) not in paths:
                paths.append((generic(path, root), what))

        with opening(record), time_limit(LIMIT_S):
            code = main(argv)
        _DISCOVERED[command] = code, paths
    return _DISCOVERED[command]


def chosen(command: str, paths: list[tuple[str, str]]) -> list[int]:
    """The indices of ``paths`` that get a case: all of them, or for a sampled command its folders and its files
    evenly spaced (the first and last included) over the slots left."""
    if command not in SAMPLED:
        return list(range(len(paths)))
    folders = [i for i, (_, what) in enumerate(paths) if what == "folder"]
    files = [i for i, (_, what) in enumerate(paths) if what == "file"]
    room = SLOTS[command] - len(folders)
    spaced = sorted({files[round(k * (len(files) - 1) / max(room - 1, 1))] for k in range(room)}) if files else []
    return sorted(folders + spaced)


def output_text(root: Path) -> bytes:
    """Every regular file below ``root`` (no link followed), joined."""
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


CASES = [(command, slot) for command, slots in SLOTS.items() for slot in range(slots)]


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize(("command", "slot"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_a_link_or_fifo_planted_as_a_path_is_opened_is_refused_or_never_followed(
    command, slot, kind, tmp_path, tmp_path_factory, inputs, capsys, no_training
):
    usual, paths = discovered(command, inputs, tmp_path_factory.mktemp(f"discover-{command}") / "work")
    picked = chosen(command, paths)
    if slot >= len(picked):
        pytest.skip(f"{command} opens {len(paths)} paths below its output folder; {len(picked)} have a case")
    n = picked[slot]
    canary = victim(tmp_path)
    argv, root = command_line(command, inputs, tmp_path / "work")
    capsys.readouterr()
    before, others, given = fingerprint(canary), outside(tmp_path, root), fingerprint(inputs)
    seen: list[Path] = []
    planted: list[Path] = []

    def plant(path: Path, what: str) -> None:
        if root not in path.parents or path in seen:
            return
        seen.append(path)
        if len(seen) - 1 != n:
            return
        if os.path.lexists(path):
            path.rename(path.with_name(path.name + ".moved"))
        if kind == "link":
            path.symlink_to(canary if what == "folder" else canary / ".netrc")
        else:
            os.mkfifo(path)
        planted.append(path)

    with opening(plant), time_limit(LIMIT_S):
        code = main(argv)
    out, err = capsys.readouterr()
    assert planted, f"{command} opened {len(seen)} paths this time, {len(paths)} in discovery"
    path = planted[0]
    assert generic(path, root) == paths[n][0]  # the path the discovery listed n-th
    assert "Traceback" not in out + err, err
    assert fingerprint(canary) == before and sorted(p.name for p in canary.rglob("*")) == [".bashrc", ".netrc"]
    assert MARKER not in output_text(root)  # nothing read through the link ends up in the output
    assert outside(tmp_path, root) == others and fingerprint(inputs) == given
    if code != usual:  # refused: one line naming the path
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code in (1, 2) and len(errors) == 1, err
        assert str(path) in errors[0], errors[0]
        assert code == 2 or command == "run", err


def test_every_path_of_each_command_has_a_case(tmp_path_factory, inputs, no_training):
    """The cases above cover every path each command opens (the sampled report aside): a command that opens more
    paths than it has slots needs more."""
    for command in SLOTS:
        _, paths = discovered(command, inputs, tmp_path_factory.mktemp(f"discover-{command}") / "work")
        assert paths, command
        if command in SAMPLED:
            assert len(chosen(command, paths)) <= SLOTS[command] and all(
                i in chosen(command, paths) for i, (_, what) in enumerate(paths) if what == "folder"
            )
        else:
            assert len(paths) <= SLOTS[command], f"{command} opens {len(paths)} paths: give it as many SLOTS"
