"""Runs that share a launch (suite.running.launchgroups): the ranks start once and train run after run, each run's
models bitwise those of a launch of its own; a failure inside one run is that run's record and the runs after it are
launched anew; a dry run names the runs that need a launch of their own, with why."""

from __future__ import annotations

import os

import pytest

from conftest import launched_runs, run_scenario, tiny_scenario
from suite.running.commands import RUN_MARK
from suite.running.launchgroups import split_log

CELLULAR = {"iterations": 2, "batches_per_iteration": 1, "mixture_samples": 40, "fitness_samples": 40}
"""A tiny cellular run (tests/test_cellular.py's)."""


def _entries(engine: str) -> list[dict]:
    """The strategies at two ranks under ``engine``; ``mpi-cellular``: cellular's 2x2 grid (MPI's Cartesian
    communicator), the slowest of the four, apart."""
    if engine == "mpi-cellular":
        return [{"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [2]}]
    return [{"strategy": s, "engine": engine, "procs": [2]} for s in ("data_parallel", "conditional", "label_partitioned")]


def test_a_launchs_output_is_cut_at_each_runs_mark():
    text = f"$ mpirun ...\nstart-up\n{RUN_MARK}b (run 2 of 3)\nb trains\n{RUN_MARK}c (run 3 of 3)\nc trains\nmpirun: done\n"
    assert split_log(text, ["a", "b", "c"]) == [
        "$ mpirun ...\nstart-up\n",
        f"{RUN_MARK}b (run 2 of 3)\nb trains\n",
        f"{RUN_MARK}c (run 3 of 3)\nc trains\nmpirun: done\n",
    ]
    # every rank marks the run it starts: the cut is at the last rank's mark, so a slower rank's last words stay
    two = f"start\nrank 1 {RUN_MARK}b (run 2 of 2)\nrank 0 a: ok\nrank 0 {RUN_MARK}b (run 2 of 2)\nb trains\n"
    assert split_log(two, ["a", "b"]) == [
        f"start\nrank 1 {RUN_MARK}b (run 2 of 2)\nrank 0 a: ok\n",
        f"rank 0 {RUN_MARK}b (run 2 of 2)\nb trains\n",
    ]
    # a run that never started (its mark is missing) gets nothing; the run before it keeps the rest of the output
    assert split_log(f"start\n{RUN_MARK}b (run 2 of 3)\nb fails\n", ["a", "b", "c"]) == [
        "start\n",
        f"{RUN_MARK}b (run 2 of 3)\nb fails\n",
        "",
    ]


def test_a_dry_run_names_each_run_that_needs_a_launch_of_its_own_and_why(tmp_path, capsys):
    from suite.cli import main

    scenario = tiny_scenario(
        "dry",
        [
            {"strategy": "data_parallel", "engine": "mpi", "procs": [2]},
            {
                "strategy": "data_parallel",
                "engine": "mpi",
                "procs": [2],
                "label": "ck",
                "train": {"checkpoint_every": {"steps": 2}},
            },
            {"strategy": "data_parallel", "engine": "horovod", "procs": [2], "label": "tuned", "horovod": {"autotune": True}},
        ],
        train={"seeds": [0, 1]},
    )
    import yaml

    path = tmp_path / "dry.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run", "--trace", "--only", "ck-*"]) == 0
    printed = capsys.readouterr().out
    assert "# ck-p2-s0-r0: a launch of its own: --trace: " in printed  # the first reason found is named
    assert main(["run", str(path), "--out", str(tmp_path / "r2"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    comments = [line for line in printed.splitlines() if line.startswith("#")]
    assert sorted(comments) == [
        "# ck-p2-s0-r0: a launch of its own: train.checkpoint_every: a stop request checkpoints the run of a launch",
        "# ck-p2-s1-r0: a launch of its own: train.checkpoint_every: a stop request checkpoints the run of a launch",
        "# one launch, 2 runs: data_parallel-bce-mpi-p2-s0-r0, data_parallel-bce-mpi-p2-s1-r0",
        "# tuned-p2-s0-r0: a launch of its own: horovod.autotune: Horovod tunes itself over one run, whose log it writes",
        "# tuned-p2-s1-r0: a launch of its own: horovod.autotune: Horovod tunes itself over one run, whose log it writes",
    ]
    assert len(launched_runs(printed)) == 6  # every run launched once


def _digests(tmp_path, engine: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """The records of the four strategies' two seeds under ``engine`` launched together (one launch), and of the
    second seeds launched one by one."""
    scenario = tiny_scenario(
        "shared", _entries(engine), train={"seeds": [0, 1], "batch_size": 16, "threads": 1, "steps": 2}, cellular=CELLULAR
    )
    (tmp_path / "together").mkdir()
    code, together = run_scenario(tmp_path / "together", scenario)
    assert code == 0, {k: r.get("error") for k, r in together.items()}
    alone = {}
    for run_id in [run_id for run_id in together if "-s1-" in run_id]:
        folder = tmp_path / run_id
        folder.mkdir()
        code, records = run_scenario(folder, scenario, "--only", run_id)
        assert code == 0, records[run_id].get("error")
        alone[run_id] = records[run_id]
    return together, alone


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "engine",
    [
        "mpi",
        pytest.param("mpi-cellular", marks=pytest.mark.matrix),
        pytest.param("torch", marks=pytest.mark.matrix),
        pytest.param("horovod", marks=pytest.mark.matrix),
    ],
)
def test_a_run_trains_the_same_model_in_a_shared_launch_as_in_its_own(tmp_path, engine):
    together, alone = _digests(tmp_path, engine)
    assert len(alone) == len(_entries(engine))
    for run_id, record in alone.items():
        shared = together[run_id]
        assert "--next-run" in shared["command"] and "--next-run" not in record["command"]  # launched with the others
        assert shared["model_digest"] == record["model_digest"], run_id  # bitwise the same generators
        assert shared["status"] == record["status"] == "ok"
        assert shared["comm"]["bytes"] == record["comm"]["bytes"]  # its own traffic, counted from zero
        assert shared.get("engine_settings") == record.get("engine_settings")  # Horovod: its own process sets listed
        # its phases lie inside its part of the launch: a rank that began it while rank 0 wrote the record before
        # did not count that wait as this run's set-up
        phases = sum(shared[f] or 0.0 for f in ("setup_s", "train_s", "eval_s", "finalize_s", "score_s"))
        assert phases <= shared["wall_s"] + 0.05, run_id
    digests = {r["model_digest"] for r in together.values()}
    assert len(digests) == len(together)  # every seed and strategy its own model


@pytest.mark.multiproc
def test_a_failure_in_one_run_of_a_launch_is_its_record_and_the_runs_after_it_are_launched_anew(tmp_path, monkeypatch):
    scenario = tiny_scenario(
        "fails",
        [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}],
        train={"seeds": [0, 1, 2], "threads": 1, "steps": 2},
    )
    second = "data_parallel-bce-mpi-p2-s1-r0"
    monkeypatch.setitem(os.environ, "SUITE_TEST_FAIL_AT_STEP", "2")
    monkeypatch.setitem(os.environ, "SUITE_TEST_FAIL_RUN", second)
    code, records = run_scenario(tmp_path, scenario)
    assert code == 1
    first, third = records["data_parallel-bce-mpi-p2-s0-r0"], records["data_parallel-bce-mpi-p2-s2-r0"]
    failed = records[second]
    assert first["status"] == "ok" and third["status"] == "ok"
    assert failed["status"] == "failed"
    assert failed["error"].splitlines()[0].startswith("rank 1 on ")  # the rank that died, in the run it was in
    assert "injected failure after step 2" in failed["error"].splitlines()[0]
    assert "--next-run" in first["command"] and "--next-run" not in third["command"]  # the third: a fresh launch
    logs = {run_id: (tmp_path / "results" / run_id / "log.txt").read_text() for run_id in records}
    assert "injected failure" in logs[second] and "injected failure" not in logs["data_parallel-bce-mpi-p2-s0-r0"]
    assert f"{RUN_MARK}{second} " in logs[second]


def test_the_report_states_each_phases_total_and_the_share_of_run_time_spent_training():
    import pandas as pd

    from suite.analysis.columns import COL
    from suite.analysis.report.tables import phase_totals, time_table, training_share_line

    frame = pd.DataFrame(
        {
            COL.run_id: ["a", "b", "c"],
            COL.status: ["ok", "ok", "failed"],
            COL.wall_s: [20.0, 10.0, 5.0],
            COL.setup_s: [2.0, 1.0, None],
            COL.warmup_s: [1.0, 1.0, None],
            COL.train_s: [12.0, 6.0, None],
            COL.eval_s: [0.0, None, None],
            COL.finalize_s: [1.0, 1.0, None],
            COL.score_s: [3.0, 1.0, None],
            COL.contended: [False, False, None],
            COL.outside_cores: [None, None, None],
        }
    )
    totals = phase_totals(time_table(frame)).set_index("phase")  # the ok runs: 30 s of wall time
    assert totals["seconds"].tolist() == pytest.approx([18.0, 3.0, 0.0, 2.0, 4.0, 3.0])  # start-up: 30 - 27
    assert totals["share"].sum() == pytest.approx(1.0) and totals["share"].iloc[0] == pytest.approx(0.6)
    line = training_share_line(frame)
    assert line is not None and line.startswith("Run time: 30 s over 2 runs, 60% of it training (goal 75%)")
    assert "the largest other phase: scoring 13%" in line
    assert training_share_line(frame.assign(**{COL.wall_s: [None, None, None]})) is None  # hand-made records: no line


@pytest.mark.multiproc
def test_an_interrupted_launch_keeps_its_finished_runs_and_resume_trains_the_rest(tmp_path, monkeypatch):
    from suite.running import launch as launching

    scenario = tiny_scenario(
        "stopped", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}], train={"seeds": [0, 1, 2], "steps": 2}
    )
    real_finished, stopped = launching._finished, []

    def ctrl_c_once_the_first_run_is_recorded(run_dir):
        done = real_finished(run_dir)
        if done and not stopped:
            stopped.append(run_dir.name)
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C as the second run began
        return done

    monkeypatch.setattr(launching, "_finished", ctrl_c_once_the_first_run_is_recorded)
    # each step sleeps ten times its length: a run lasts seconds, longer than the launcher's second between two looks,
    # so the second run is still going on when the first's record is seen (an unslowed 2-step run can end before)
    monkeypatch.setenv("SUITE_TEST_SLOWDOWN", "10")
    code, records = run_scenario(tmp_path, scenario)
    monkeypatch.delenv("SUITE_TEST_SLOWDOWN")
    first, second, third = (f"data_parallel-bce-mpi-p2-s{s}-r0" for s in (0, 1, 2))
    assert code != 0 and stopped == [first]
    assert records[first]["status"] == "ok" and "--next-run" in records[first]["command"]  # finished: kept whole
    assert records[second]["status"] == "interrupted" and third not in records  # the one going on; the one not begun
    monkeypatch.setattr(launching, "_finished", real_finished)
    code, resumed = run_scenario(tmp_path, scenario, "--resume")
    assert code == 0 and {r["status"] for r in resumed.values()} == {"ok"}
    assert resumed[first] == records[first]  # skipped: the finished run is not trained again
    assert "--next-run" in resumed[second]["command"] and resumed[third]["command"] == resumed[second]["command"]


def test_runs_share_a_launch_only_where_their_engine_starts_the_same(tmp_path, capsys):
    import yaml

    from suite.cli import main

    runs = [{"strategy": s, "engine": "horovod", "procs": [2]} for s in ("data_parallel", "conditional", "label_partitioned")]
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("keys", runs)))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    # hvd.init() with dynamic process sets for the strategy that splits its ranks into class groups, the global set
    # for the others: two launches
    assert printed.splitlines()[0] == "# one launch, 2 runs: data_parallel-bce-horovod-p2-r0, conditional-bce-horovod-p2-r0"
    commands = [line for line in printed.splitlines() if not line.startswith("#")]
    assert len(commands) == 2 and launched_runs(commands[1]) == ["label_partitioned-bce-horovod-p2-r0"]
