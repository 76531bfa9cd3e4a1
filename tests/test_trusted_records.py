"""Issue 61, as a group member of a shared results folder would attack it: decisions rest only on records you wrote.

A results folder with the sticky group bit (``1775``) lets a group member add folders of their own, not change yours.
Each case plants what such a member can (folders and links they own, copies of real records with forged numbers) and
checks that the sequential seeds, the report's verdicts and ``findings.csv`` are what they are without the plants, that
each plant is named in one line, and that nothing of a private run reaches a report through a link. As root the
plants are given to another user id for real (``os.chown``); otherwise the ownership the kernel reports is faked for
exactly the planted paths. The rows of docs/reliability.md ("Shared results folders") name these tests.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from test_hostile_records import digits_records, results_folder

from conftest import tiny_scenario
from suite.cli import main
from suite.config.builtin import resolve_scenario
from suite.config.expansion import expand, load_scenario
from suite.records.results import new_record, read_record, write_record
from suite.records.trusted import trusted_records
from suite.running import rerun, sweep
from suite.running.finished import as_recorded
from suite.tools import sequential_seeds

OTHER = 54321
"""The group member's user id (no such user needs to exist: the kernel records the number)."""


@pytest.fixture
def give_away(monkeypatch):
    """``give_away(path)``: make ``path`` (a link itself, not what it points to) the group member's."""
    if os.geteuid() == 0:
        return lambda path: os.chown(path, OTHER, OTHER, follow_symlinks=False)
    given: set[str] = set()
    real = os.stat

    def stat(path, *args, **kwargs):  # what the kernel would say of a planted path: another owner
        info = real(path, *args, **kwargs)
        if os.path.abspath(path) in given and kwargs.get("follow_symlinks", True) is False:
            return os.stat_result((info[0], info[1], info[2], info[3], OTHER, OTHER, *info[6:10]))
        return info

    monkeypatch.setattr(os, "stat", stat)
    return lambda path: given.add(os.path.abspath(path))


def planted(folder: Path, data: dict, give_away) -> Path:
    """A run folder with ``data`` as its record, made by the group member."""
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps(data))
    give_away(folder / "result.json")
    give_away(folder)
    return folder


# --- the sequential seeds --------------------------------------------------------------------------------------------

SCENARIO = (
    "name: s\ntrain: {seeds: {initial: 3, step: 3, max: 6}, budget_images: 4096}\n"
    "runs:\n  - {strategy: conditional, engine: torch, procs: [2]}\n"
    "  - {strategy: data_parallel, engine: torch, procs: [2]}\n"
    "  - {strategy: label_partitioned, engine: torch, procs: [2]}\n"
)
LATE = {  # conditional five times ahead; the other two alike with a wide spread: undecided after the first block
    "conditional": [20.0, 20.4, 19.6, 20.0, 20.2, 19.8],
    "data_parallel": [100.0, 130.0, 90.0, 120.0, 85.0, 110.0],
    "label_partitioned": [120.0, 85.0, 140.0, 95.0, 115.0, 100.0],
}


def record_of(run, late: float) -> dict:
    """What a run of ``run`` would record, its late FID ``late`` (the quality curve the verdicts read)."""
    curve = [late * 3, late * 2, late * 1.1, late, late / 1.1]
    return {
        "status": "ok",
        "run_id": run.run_id,
        "scenario": "s",
        "strategy": run.strategy,
        "loss": run.loss,
        "engine": run.engine,
        "procs": run.procs,
        "scaling": "strong",
        "seed": run.train.seed,
        "train_s": 10.0,
        "images_per_s": 100.0,
        "budget_images": 5000,
        "quality": {
            "features": "classifier:digits",
            "n": 500,
            "fid": curve[-1],
            "ema_fid": curve[-1],
            "ema_n": 500,
            "is_mean": 3.0,
            "pixel_std": 0.3,
        },
        "curve": [{"images": 1000 * (i + 1), "clock_s": 2.0 * (i + 1), "fid": v} for i, v in enumerate(curve)],
        "settings": as_recorded(run.to_dict()),
    }


def test_planted_records_neither_end_nor_skip_nor_extend_a_sequence(tmp_path, monkeypatch, give_away, caplog):
    (scenario_file := tmp_path / "s.yaml").write_text(SCENARIO)
    scenario = load_scenario(scenario_file)
    runs = expand(scenario)
    out = tmp_path / "results"
    out.mkdir()
    out.chmod(0o1775)  # a shared group folder: every member may add folders
    first = next(r for r in runs if r.strategy == "data_parallel" and r.train.seed == 0)
    ending = record_of(first, 100.0)  # a copy whose policy ends at the first look: it used to end the procedure
    ending["settings"]["train"]["seeds"] = {"initial": 3, "step": 3, "max": 3}
    planted(out / "aaa-ends", {**ending, "run_id": "aaa-ends"}, give_away)
    for run in runs:  # every later seed of data_parallel and label_partitioned, forged tight: they would decide the pair
        if run.train.seed >= 3 and run.strategy != "conditional":
            planted(
                out / f"zzz-{run.run_id}", {**record_of(run, 50.0 + run.train.seed), "run_id": f"zzz-{run.run_id}"}, give_away
            )
    mine_elsewhere = tmp_path / "mine" / first.run_id  # the user's own record of the same run id, reached by a link
    write_record(mine_elsewhere, new_record(record_of(first, 20.0)))
    (out / "linked").symlink_to(mine_elsewhere)
    stale = record_of(first, 20.0)
    stale["settings"]["train"]["budget_images"] = 999  # the user's own, of other settings than the plan's
    write_record(out / "s-stale", new_record({**stale, "run_id": "s-stale"}))
    blocks: list[list[str]] = []

    def fake_run(_file, _scenario, block, others, folder, options, written):  # the sweep hands its records back
        blocks.append(sorted(r.run_id for r in block))
        for r in block:
            written[r.run_id] = new_record(record_of(r, LATE[r.strategy][r.train.seed]))
            write_record(folder / r.run_id, written[r.run_id])
        return 0

    monkeypatch.setattr(sequential_seeds, "run_scenario", fake_run)
    options = type("O", (), {"sweep": type("S", (), {"dry_run": False})()})()
    assert sequential_seeds.run_with_seeds(scenario_file, scenario, runs, [], out, options) == 0
    assert len(blocks) == 2 and len(blocks[0]) == 9  # as without the plants (test_sequential_seeds)
    assert all("conditional" not in run_id for run_id in blocks[1])
    assert sorted({run_id.rsplit("-s", 1)[1] for run_id in blocks[1]}) == ["3-r0", "4-r0", "5-r0"]
    named = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sequential seeds: skipped")]
    assert any(f"{out / 'aaa-ends'}: owned by user {OTHER}" in line for line in named)
    assert any(f"{out / 'linked'}: a symbolic link" in line for line in named)
    assert any(f"{out / 's-stale'}: not a run this scenario plans" in line for line in named)
    assert all(line.count("\n") == 0 for line in named)


def test_a_record_of_other_settings_under_a_planned_run_id_is_left_out(tmp_path):
    runs = expand(_scenario(tmp_path))
    run = runs[0]
    changed = record_of(run, 20.0)
    changed["settings"]["train"]["seeds"] = {"initial": 3, "step": 3, "max": 3}
    write_record(tmp_path / "results" / run.run_id, new_record(changed))
    chosen = trusted_records(tmp_path / "results", plan={r.run_id: as_recorded(r.settings()) for r in runs})
    assert chosen.records == []
    assert chosen.left_out == [
        f"skipped {tmp_path / 'results' / run.run_id}: made with other settings than this scenario plans (train)"
    ]


def _scenario(tmp_path: Path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    return load_scenario(tmp_path / "s.yaml")


# --- the report: verdicts, findings.csv, links to private runs ------------------------------------------------------


def test_planted_records_and_a_link_to_a_private_run_change_nothing_in_the_report(tmp_path, give_away, caplog):
    records = digits_records(
        sorted(r["run_id"] for r in json.loads((Path(__file__).parents[1] / "reports/digits/records.json").read_text()))
    )
    root = results_folder(tmp_path / "results", records)
    root.chmod(0o1775)
    assert main(["report", str(root), "--out", str(tmp_path / "before")]) == 0
    data_parallel = [r for r in records if r["strategy"] == "data_parallel"]
    for i, r in enumerate(data_parallel[:4]):  # four copies of real records with tight fake late FIDs (hole 1)
        forged = json.loads(json.dumps(r))
        for point in forged.get("curve") or []:
            point["fid"] = 20.0 + 0.01 * i
        forged["quality"]["fid"] = 20.0
        planted(root / f"zzz-{i}", {**forged, "run_id": f"zzz-{i}", "seed": 10 + i}, give_away)
    private = tmp_path / "victim-private"  # another of the victim's folders, that the planter cannot read (hole 2)
    secret = {**records[0], "run_id": "secret-run", "status": "failed", "error": "SECRET-HOST-AND-COMMAND"}
    results_folder(private, [secret])
    private.chmod(0o700)
    (root / "x").symlink_to(private / "secret-run")
    give_away(root / "x")
    caplog.clear()
    assert main(["report", str(root), "--out", str(tmp_path / "after")]) == 0
    for name in ("findings.csv", "headline.csv", "records.json", "runs.csv"):
        assert (tmp_path / "after" / name).read_text() == (tmp_path / "before" / name).read_text(), name
    written = [p for p in (tmp_path / "after").rglob("*") if p.is_file()]
    assert not any(b"SECRET-HOST" in p.read_bytes() or b"zzz-" in p.read_bytes() for p in written if p.suffix != ".md")
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped ")]
    assert sorted(w.split(": ")[0] for w in warned) == sorted(
        [f"skipped {root / 'x'}", *(f"skipped {root / f'zzz-{i}'}" for i in range(4))]
    )
    report = (tmp_path / "after" / "report.md").read_text()
    assert "SECRET" not in report and f"{root / 'x'}: a symbolic link" in report  # named on the page, not merged


def test_a_colleagues_folder_that_only_they_can_write_is_theirs_to_report(tmp_path, give_away):
    records = digits_records()
    root = results_folder(tmp_path / "theirs", records)
    for run in records:
        give_away(root / run["run_id"] / "result.json")
        give_away(root / run["run_id"])
    give_away(root)
    root.chmod(0o755)
    if os.geteuid() != 0:
        pytest.skip("the folder owner's trust needs the folder really given away")
    assert sorted(r.run_id for r in trusted_records(root).records) == sorted(r["run_id"] for r in records)
    root.chmod(0o1775)  # writable by the group: the owner's records no longer speak for the folder
    assert trusted_records(root).records == []


def test_one_link_to_an_ok_run_or_a_swapped_sample_grid_does_not_stop_the_report(tmp_path, caplog):
    records = digits_records()
    root = results_folder(tmp_path / "results", records[:2])
    other = results_folder(tmp_path / "elsewhere", records[2:])
    (root / "linked").symlink_to(other / records[2]["run_id"])
    key = tmp_path / "id_ed25519"
    key.write_text("PRIVATE KEY")
    (root / records[0]["run_id"] / "samples.png").symlink_to(key)
    os.link(key, root / records[1]["run_id"] / "samples.png")
    assert main(["report", str(root), "--out", str(tmp_path / "report")]) == 0
    warned = " | ".join(r.getMessage() for r in caplog.records)
    assert f"skipped {root / 'linked'}: a symbolic link" in warned
    assert f"{root / records[0]['run_id'] / 'samples.png'}: a symbolic link" in warned
    assert "a hard link (one of 2 names of one file)" in warned
    reported = json.loads((tmp_path / "report" / "records.json").read_text())
    assert sorted(r["run_id"] for r in reported) == sorted(r["run_id"] for r in records[:2])
    assert not any(b"PRIVATE KEY" in p.read_bytes() for p in (tmp_path / "report").rglob("*") if p.is_file())


# --- --out: a link someone else planted -------------------------------------------------------------------------------


def test_an_explicit_out_that_is_a_link_someone_else_planted_is_refused(tmp_path, give_away, capsys):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario("quick", [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}])))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    mine = tmp_path / "mine"  # another of the user's folders, with a scenario the link would overwrite (hole 3)
    mine.mkdir()
    (mine / "scenario.yaml").write_text("my own\n")
    (link := shared / "quick").symlink_to(mine)
    give_away(link)
    assert main(["run", str(scenario), "--out", str(link), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {link}: a symbolic link made by user {OTHER}, not by you") and "\n" not in err
    assert sorted(p.name for p in mine.iterdir()) == ["scenario.yaml"] and (mine / "scenario.yaml").read_text() == "my own\n"
    (own := shared / "mine").symlink_to(mine)  # the user's own link: their choice, followed
    assert main(["run", str(scenario), "--out", str(own), "--dry-run"]) == 0


# --- a stopped --rerun ------------------------------------------------------------------------------------------------


def test_a_stopped_rerun_names_its_old_run_reports_it_and_the_next_command_puts_it_back(tmp_path, caplog):
    records = digits_records()
    root = results_folder(tmp_path / "results", records[:1])
    run_dir = root / records[0]["run_id"]
    aside = rerun.set_aside(run_dir)  # what --rerun does first; then SIGTERM: the new run is interrupted
    write_record(run_dir, new_record({**records[0], "status": "interrupted", "error": "stopped by SIGTERM"}))
    stop = type("Stop", (Exception,), {"__str__": lambda self: "SIGTERM"})()
    said = sweep._stopped(stop, [type("P", (), {"run": type("R", (), {"run_id": run_dir.name})(), "run_dir": run_dir})()])
    assert f"kept in {aside}; the next `suite run` puts it back" in said
    chosen = trusted_records(root)  # the report: the finished run, from where it is, said so
    assert [r.status for r in chosen.records] == ["ok"]
    assert chosen.set_aside and str(aside) in chosen.set_aside[0]
    assert rerun.put_back(run_dir, continuing=True).startswith(f"{run_dir.name}: --rerun --resume continues")
    line = rerun.put_back(run_dir, continuing=False)  # the next plain command
    assert line.startswith(f"{run_dir.name}: put back the finished run") and not aside.exists()
    assert read_record(run_dir).status == "ok" and rerun.left_aside(run_dir) is None
    assert rerun.put_back(run_dir, continuing=False) is None  # nothing left to settle


def test_a_rerun_stopped_after_its_new_run_was_ok_loses_the_old_one_on_the_next_command(tmp_path):
    records = digits_records()
    root = results_folder(tmp_path / "results", records[:1])
    run_dir = root / records[0]["run_id"]
    aside = rerun.set_aside(run_dir)
    write_record(run_dir, new_record(records[0]))
    assert rerun.put_back(run_dir, continuing=False) == f"{run_dir.name}: the run it replaces is removed"
    assert not aside.exists() and read_record(run_dir).status == "ok"


# --- names and the dry run ------------------------------------------------------------------------------------------


def test_a_local_file_with_a_builtin_scenarios_name_runs_with_a_word(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    builtin = resolve_scenario("quickstart")
    shutil.copy(builtin, tmp_path / "quickstart.yaml")  # an unchanged copy: the same scenario, nothing to say
    assert resolve_scenario("quickstart.yaml") == Path("quickstart.yaml") and not caplog.records
    (tmp_path / "quickstart").write_text("name: mine\n")
    assert resolve_scenario("quickstart") == Path("quickstart")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("warning: quickstart: runs the file ./quickstart in the working folder, not the built-in")
    assert str(builtin) in line
    caplog.clear()
    assert resolve_scenario("./quickstart") == Path("quickstart") and not caplog.records  # a path: the user's choice


def test_a_dry_run_of_more_ranks_than_the_machine_holds_says_so(tmp_path, caplog, capsys):
    scenario = tmp_path / "big.yaml"
    runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [1_000_000], "scaling": "weak"}]
    scenario.write_text(yaml.safe_dump(tiny_scenario("big", runs)))
    assert main(["run", str(scenario), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    assert "--nproc_per_node 1000000" in capsys.readouterr().out
    (line,) = [r.getMessage() for r in caplog.records if "1000000 ranks on this machine" in r.getMessage()]
    assert line.startswith("warning: data_parallel-") and line.endswith("(the real run stops here)")


# --- with ordinary user ids for real: a victim and a group member, each its own process ------------------------------

VICTIM, MEMBER, GROUP = 61001, 61002, 61000


def as_user(uid: int, action) -> str:
    """Run ``action()`` in a child process with user id ``uid`` (and group :data:`GROUP`); return what it returns (a
    string) or its error. The suite is imported before, so nothing of the root-only virtual environment is read."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: an ordinary user from here on
        os.close(read)
        try:
            os.setgroups([GROUP])
            os.setgid(GROUP)
            os.setuid(uid)
            os.umask(0o002)  # a shared group's usual umask: the suite's own modes must hold anyway
            answer = str(action())
        except BaseException as error:  # noqa: BLE001  # any failure is the answer the parent checks
            answer = f"{type(error).__name__}: {error}"
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return answer


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two ordinary users")
def test_as_two_ordinary_users_a_member_plants_records_and_a_link_and_steers_nothing(tmp_path):
    import tempfile

    from suite.records.nofollow import check_private_folder

    top = Path(tempfile.mkdtemp(prefix="issue61-", dir="/tmp"))  # pytest's folder is root's alone: one all can enter
    try:
        top.chmod(0o755)
        shared = top / "shared"
        shared.mkdir()
        os.chown(shared, VICTIM, GROUP)
        shared.chmod(0o1775)  # the victim's results folder, shared with the group, sticky
        records = digits_records()
        private = top / "victim-home"

        def victim_writes() -> str:
            for r in records:
                write_record(shared / r["run_id"], new_record(r))
            write_record(private / "secret-run", new_record({**records[0], "run_id": "secret-run", "error": "SECRET"}))
            private.chmod(0o700)
            (top / "victim-mine").mkdir()
            return "ok"

        def member_plants() -> str:
            for i in range(4):
                write_record(shared / f"zzz-{i}", new_record({**records[0], "run_id": f"zzz-{i}"}))
            (shared / "x").symlink_to(private / "secret-run")
            (shared / "out").symlink_to(top / "victim-mine")  # hole 3: a link under the name the victim will give
            try:  # the sticky bit: the victim's own folders are not the member's to replace
                os.rename(shared / records[0]["run_id"], shared / "taken")
            except PermissionError:
                return "ok"
            return "renamed the victim's folder"

        def victim_reads() -> str:
            chosen = trusted_records(shared)
            names = sorted(r.run_id for r in chosen.records)
            try:
                check_private_folder(shared / "out")
                out = "followed"
            except ValueError as error:
                out = str(error).split(":")[1].strip()
            return json.dumps({"records": names, "left_out": chosen.left_out, "out": out})

        os.chown(top, 0, GROUP)
        top.chmod(0o775)  # both may make their folders here
        assert as_user(VICTIM, victim_writes) == "ok"
        assert as_user(MEMBER, member_plants) == "ok"
        seen = json.loads(as_user(VICTIM, victim_reads))
        assert seen["records"] == sorted(r["run_id"] for r in records)
        assert sorted(line.split(": ")[0] for line in seen["left_out"]) == sorted(  # "out" holds no record: not one
            f"skipped {shared / name}" for name in ("x", "zzz-0", "zzz-1", "zzz-2", "zzz-3")
        ), seen
        assert any(f"owned by user {MEMBER}" in line for line in seen["left_out"])
        assert seen["out"] == f"a symbolic link made by user {MEMBER}, not by you (user {VICTIM}) or root"
        assert not any("SECRET" in line for line in seen["left_out"])
    finally:
        shutil.rmtree(top)
