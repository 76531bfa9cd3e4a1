"""`suite gate`: the paired verdicts on known differences, the interleaved A/B loop on a real git
repository with a fake workload, bad input as one line and exit 2, and the slowdown knob."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import tiny_scenario
from suite.analysis.stats import paired
from suite.cli import main
from suite.records.results import new_record
from suite.running import fault_hooks
from suite.tools import gate, gate_sides

LOG_10PCT = math.log(1.1)

# --- the statistics ----------------------------------------------------------------------------------------


def test_noise_around_no_change_passes_and_a_clear_slowdown_fails():
    rng = np.random.default_rng(1)
    same = paired.paired_verdict(rng.normal(0, 0.03, 6), LOG_10PCT)
    assert same.verdict == paired.PASS and same.upper < LOG_10PCT
    slower = paired.paired_verdict(rng.normal(math.log(1.25), 0.03, 6), LOG_10PCT)
    assert slower.verdict == paired.FAIL and slower.p_value < 0.05 and slower.mean > LOG_10PCT


def test_a_significant_change_below_the_threshold_is_not_a_failure():
    v = paired.paired_verdict([0.03, 0.04, 0.035, 0.045, 0.03, 0.04], LOG_10PCT)
    assert v.p_value < 0.05 and v.verdict == paired.PASS


def test_too_noisy_to_tell_is_inconclusive_and_says_how_many_more_pairs():
    v = paired.paired_verdict([0.3, -0.2, 0.25, -0.1, 0.2], LOG_10PCT)
    assert v.verdict == paired.INCONCLUSIVE and v.more_pairs is not None and v.more_pairs >= 1


def test_four_pairs_can_never_fail_however_slow():
    # Wilcoxon's smallest one-sided p with 4 pairs is 1/16: the gate needs 5 (its --min-pairs floor)
    v = paired.paired_verdict([0.5, 0.6, 0.55, 0.7], LOG_10PCT)
    assert v.verdict == paired.INCONCLUSIVE and v.p_value == pytest.approx(1 / 16)


def test_a_count_that_does_not_vary_is_decided_on_its_value():
    assert paired.paired_verdict([0.0] * 5, 0.1).verdict == paired.PASS
    grown = paired.paired_verdict([0.25] * 5, 0.1)
    assert grown.verdict == paired.FAIL and grown.p_value is None


def test_differences_point_the_same_way_for_every_metric():
    images, step, bytes_ = gate.GATED_METRICS
    assert paired.difference(images, 1000, 800) == pytest.approx(math.log(1.25))  # fewer images/s: slower
    assert paired.difference(step, 0.1, 0.125) == pytest.approx(math.log(1.25))  # longer steps: slower
    assert paired.difference(bytes_, 100, 120) == pytest.approx(0.2)
    assert paired.change_pct(images, math.log(1.25)) == pytest.approx(25)
    assert paired.threshold_margin(images, 10) == pytest.approx(LOG_10PCT) and paired.threshold_margin(bytes_, 10) == 0.1


def test_the_overall_verdict_is_the_worst_one():
    assert paired.overall([paired.PASS, paired.INCONCLUSIVE, paired.FAIL]) == paired.FAIL
    assert paired.overall([paired.PASS, paired.INCONCLUSIVE]) == paired.INCONCLUSIVE
    assert paired.overall([paired.PASS, paired.PASS]) == paired.PASS


# --- the gate on a real repository, with a fake workload ---------------------------------------------------


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with two commits on main, which the gate takes for its own checkout."""
    root = tmp_path / "repo"
    (root / "suite").mkdir(parents=True)
    (root / "ci").mkdir()
    (root / "ci" / "requirements.lock").write_text("torch==2\n")
    (root / "suite" / "code.py").write_text("x = 1\n")
    (root / "gate.yaml").write_text(yaml.safe_dump({"name": "g", "train": {"seeds": [0, 1, 2]}, "runs": []}))
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (root / "suite" / "code.py").write_text("x = 2\n")
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    monkeypatch.setattr(gate, "repository", lambda: root)
    monkeypatch.setattr(gate, "check_side_imports", lambda side: None)
    monkeypatch.setattr(gate, "host_cpu_seconds", lambda: None)  # the host's other load is unknown: never discard
    return root


def fake_workload(slowdown=1.0, fail_on=None, digests_differ=False):
    """A stand-in for run_workload: one run whose images/s is 1000 (A) or 1000 / slowdown (B), with noise."""
    rng = np.random.default_rng(0)
    calls = []

    def run(side, scenario, out, timeout):
        calls.append((side.name, out.parent.name, yaml.safe_load(scenario.read_text())["train"]["seed"]))
        if fail_on and (side.name, out.parent.name) == fail_on:
            raise gate.GateError(f"{side.name} side ({side.label}): run r0 failed: RuntimeError: boom ({out})")
        speed = 1000 * float(rng.normal(1, 0.02)) / (slowdown if side.name == "candidate" else 1)
        digest = side.name if digests_differ else "same"
        out.mkdir(parents=True, exist_ok=True)
        return {
            "r0": new_record(
                {"images_per_s": speed, "telemetry": {"step_p50": 64 / speed}, "comm": {"bytes": 5}, "model_digest": digest}
            )
        }

    run.calls = calls
    return run


def settings(repo, tmp_path, **kw):
    return gate.Settings(scenario=repo / "gate.yaml", out=tmp_path / "out", baseline=kw.pop("baseline", "HEAD~1"), **kw)


def test_an_unchanged_candidate_passes_after_interleaved_pairs(repo, tmp_path, monkeypatch):
    run = fake_workload()
    monkeypatch.setattr(gate, "run_workload", run)
    result = gate.run_gate(settings(repo, tmp_path))
    assert result.verdict == paired.PASS and result.exit_code == 0
    pairs = [c for c in run.calls if c[1].startswith("pair")]
    assert [c[0][0] for c in pairs[:8]] == list("bccbbccb")  # A B B A A B B A (baseline, candidate)
    assert [c[2] for c in pairs[::2]] == [0, 1, 2, 0, 1]  # pair i on seed i % 3, on both sides
    assert [c[1] for c in run.calls[:2]] == ["warmup", "warmup"] and len(result.pairs) == 5
    written = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert written["sides"]["A"]["commit"] != written["sides"]["B"]["commit"]
    assert {v["metric"]: v["verdict"] for v in written["verdicts"]} == {
        "images_per_s": "PASS",
        "step_p50": "PASS",
        "comm_bytes": "PASS",
        "fid": "PASS",
    }
    assert "identical models" in (tmp_path / "out" / "gate.md").read_text()
    assert len((tmp_path / "out" / "pairs.csv").read_text().splitlines()) == 1 + 2 * 5
    assert not (tmp_path / "out" / "baseline-src").exists()  # the worktree is removed, the results kept
    assert (
        "baseline-src" not in subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    )


def test_a_slower_candidate_fails(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "run_workload", fake_workload(slowdown=1.2))
    result = gate.run_gate(settings(repo, tmp_path))
    assert result.verdict == paired.FAIL and result.exit_code == 1
    assert result.reason.startswith("FAIL: r0 images_per_s +20") and "p = " in result.reason


def test_differing_models_are_scored_over_the_same_seeds(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "run_workload", fake_workload(digests_differ=True))
    seed_fid = {0: 50.0, 1: 60.0, 2: 70.0}  # A's seed spread: 10

    def score(scorer, run_dir, s):
        pair = int(run_dir.parents[1].name[4:])
        return seed_fid[pair % 3] + (30.0 + pair if run_dir.parent.name == "B" else 0.0)

    monkeypatch.setattr(gate, "score_fid", score)
    result = gate.run_gate(settings(repo, tmp_path))
    fid = next(v for v in result.verdicts if v["metric"] == "fid")
    assert fid["verdict"] == paired.FAIL and fid["change"] == pytest.approx(32)
    assert "seed spread 10" in fid["note"] and result.exit_code == 1


def test_a_side_that_fails_is_one_line_exit_2_and_keeps_the_pairs_done(repo, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gate, "run_workload", fake_workload(fail_on=("baseline", "pair02")))
    code = main(["gate", "--baseline", "HEAD~1", "--scenario", str(repo / "gate.yaml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: baseline side (HEAD~1): run r0 failed: RuntimeError: boom")
    written = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert written["verdict"] == "ERROR" and len(written["pairs"]) == 2


@pytest.mark.parametrize(
    ("change", "args", "message"),
    [
        (None, ["--baseline", "no-such-ref"], "error: --baseline: no revision named 'no-such-ref'"),
        ("edit", [], "error: candidate: the working tree has 1 uncommitted change(s) (suite/code.py); commit or stash"),
        (None, ["--min-pairs", "3"], "error: --min-pairs: at least 5"),
        (None, ["--scenario", "nowhere.yaml"], "error: --scenario: no file nowhere.yaml"),
        (None, ["--max-foreign-cores", "-1"], "error: --max-foreign-cores: zero or more, got -1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(repo, tmp_path, capsys, change, args, message):
    if change:
        (repo / "suite" / "code.py").write_text("x = 3\n")
    argv = ["gate", "--scenario", str(repo / "gate.yaml"), "--out", str(tmp_path / "out"), *args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err


def test_the_default_baseline_is_the_merge_base_with_main(repo):
    subprocess.run(["git", "-C", str(repo), "checkout", "-qb", "topic"], check=True)
    label, commit = gate_sides.baseline_commit(repo, None)
    main_head = subprocess.run(["git", "-C", str(repo), "rev-parse", "main"], capture_output=True, text=True).stdout.strip()
    assert label == "merge-base(HEAD, main)" and commit == main_head


def test_the_baseline_gets_its_own_environment_when_the_lock_differs(repo, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(gate.subprocess, "run", _recording_run(calls))
    (repo / "ci" / "requirements.lock").write_text("torch==3\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "commit", "-qam", "lock"], check=True)
    side = gate_sides.baseline_side(repo, "HEAD~1", gate_sides.git(repo, "rev-parse", "HEAD~1"), tmp_path)
    assert side.venv == "own" and side.python == tmp_path / "baseline-venv" / "bin" / "python"
    assert any(c[:2] == ["bash", "ci/setup.sh"] for c in calls)
    same = gate_sides.baseline_side(repo, "HEAD", gate_sides.git(repo, "rev-parse", "HEAD"), tmp_path)
    assert same.venv == "shared" and same.python == Path(sys.executable)


def _recording_run(calls):
    real = subprocess.run

    def run(command, *args, **kwargs):
        calls.append(list(command))
        if command[:2] == ["bash", "ci/setup.sh"]:
            return subprocess.CompletedProcess(command, 0, "", "")
        return real(command, *args, **kwargs)

    return run


# --- the real workload and the knob ------------------------------------------------------------------------


@pytest.mark.multiproc
def test_a_real_workload_that_fails_names_its_side(tmp_path):
    repo = gate.repository()
    scenario = tmp_path / "w.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario("w", [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}])))
    side = gate_sides.Side(
        "candidate", "HEAD", "x", repo, Path(sys.executable), {"SUITE_TEST_FAIL_AT_STEP": "2", "SUITE_TEST_FAIL_RANK": "0"}
    )
    gate.check_side_imports(side)
    with pytest.raises(gate.GateError) as caught:
        gate.run_workload(side, scenario, tmp_path / "out", timeout=120)
    assert str(caught.value).startswith("candidate side (HEAD): run data_parallel-bce-torch-p1-r0 failed:")
    assert "injected failure after step 2" in str(caught.value)


class FakeTelemetry:
    def __init__(self):
        self._step = None
        self.ended = []

    def begin_step(self):
        if self._step is None:
            self._step = "running"

    def end_step(self, images, train_images=0, eval_images=0):
        self._step = None
        self.ended.append(images)


def test_the_slowdown_knob_sleeps_a_fraction_of_each_step(monkeypatch):
    clock = iter([10.0, 10.5, 20.0, 20.2])
    slept = []
    monkeypatch.setattr(fault_hooks.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(fault_hooks.time, "sleep", slept.append)
    monkeypatch.setenv("SUITE_TEST_SLOWDOWN", "0.15")
    telemetry = FakeTelemetry()
    fault_hooks.slow_down_steps(telemetry)
    for _ in range(2):
        telemetry.begin_step()
        telemetry.begin_step()  # a second begin inside a step keeps the first start
        telemetry.end_step(32)
    assert slept == pytest.approx([0.15 * 0.5, 0.15 * 0.2]) and telemetry.ended == [32, 32]


def test_without_the_knob_steps_are_untouched(monkeypatch):
    monkeypatch.delenv("SUITE_TEST_SLOWDOWN", raising=False)
    telemetry = FakeTelemetry()
    fault_hooks.slow_down_steps(telemetry)
    assert telemetry.end_step.__func__ is FakeTelemetry.end_step


def test_an_inconclusive_summary_says_how_many_pairs_or_that_the_change_sits_on_the_threshold():
    from suite.tools.gate_files import MANY_PAIRS, summary_line

    def row(more):
        return {"run_id": "r0", "metric": "images_per_s", "verdict": paired.INCONCLUSIVE, "more_pairs": more}

    assert summary_line(paired.INCONCLUSIVE, [row(3)], 10).endswith("about 3 more pairs would decide (raise --max-pairs)")
    close = summary_line(paired.INCONCLUSIVE, [row(MANY_PAIRS + 1)], 10)
    assert close.endswith(f"the change is close to the threshold: more than {MANY_PAIRS} more pairs would be needed")


def test_a_pair_run_while_other_processes_used_the_host_is_discarded_and_run_again(repo, tmp_path, monkeypatch):
    run = fake_workload()
    monkeypatch.setattr(gate, "run_workload", run)
    busy = iter([1.5, 0.0])  # pair 0's A run shared the host with 1.5 busy cores; every later run had it alone

    def measured(call):
        return call(), next(busy, 0.0)

    monkeypatch.setattr(gate, "foreign_cores", measured)
    result = gate.run_gate(settings(repo, tmp_path))
    assert result.verdict == paired.PASS and len(result.pairs) == 5
    assert [d["pair"] for d in result.discarded] == [0] and result.discarded[0]["foreign_cores"]["A"] == 1.5
    assert [c[1] for c in run.calls[2:6]] == ["pair00", "pair00", "pair00-again1", "pair00-again1"]
    assert "1 pairs discarded (host busy)" in (tmp_path / "out" / "gate.md").read_text()


def test_a_host_busy_throughout_gives_inconclusive_not_a_verdict(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "run_workload", fake_workload(slowdown=1.5))
    monkeypatch.setattr(gate, "foreign_cores", lambda call: (call(), 1.0))
    result = gate.run_gate(settings(repo, tmp_path, max_pairs=5))
    assert result.verdict == paired.INCONCLUSIVE and result.exit_code == 5 and result.pairs == []
    assert result.reason.startswith("INCONCLUSIVE: the host was busy: 0 undisturbed pairs of the 5 needed, 6 discarded")


def test_the_host_load_measure_counts_only_other_processes_cpu(monkeypatch):
    host = iter([100.0, 103.0])  # the host was busy 3 CPU-seconds
    own = iter([10.0, 12.0])  # 2 of them were the workload's own processes
    clock = iter([0.0, 2.0])
    monkeypatch.setattr(gate, "host_cpu_seconds", lambda: next(host))
    monkeypatch.setattr(gate, "children_cpu_seconds", lambda: next(own))
    monkeypatch.setattr(gate.time, "monotonic", lambda: next(clock))
    assert gate.foreign_cores(lambda: "done") == ("done", pytest.approx(0.5))


def test_the_real_host_reader_reads_proc_stat():
    first, second = gate.host_cpu_seconds(), gate.host_cpu_seconds()
    assert first is not None and second >= first > 0


def test_the_command_lines_defaults_are_the_gates_own():
    from suite.cli.parser import build_parser

    args = build_parser().parse_args(["gate"])
    defaults = gate.Settings(scenario=Path("s"), out=Path("o"))
    names = ("threshold", "alpha", "min_pairs", "max_pairs", "max_minutes", "timeout", "inject_slowdown", "max_foreign_cores")
    for name in names:
        assert getattr(args, name) == getattr(defaults, name), name
