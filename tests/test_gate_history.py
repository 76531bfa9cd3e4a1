"""The gate's history (`suite gate` appends, `suite gate-history show` and `bisect` read): a slow regression that
passes every gate fails the history, the commit where a series moved is named, and a history from elsewhere (another
machine, another suite version, a damaged file, a planted link) is named, never mixed or followed."""

import json
import logging
import math
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suite.analysis.stats import paired
from suite.cli import main
from suite.records.results import new_record
from suite.tools import gate, gate_sides
from suite.tools.gate_history import append_step, env_name, record_history
from suite.tools.gate_history_read import read_history
from suite.tools.gate_series import bisect, build_series

NOISE = (0.01, -0.01, 0.005, -0.005, 0.0)
"""Each pair's log-ratio noise: it averages to zero, so a step's mean change is exactly the one scripted."""
MACHINE = "ci-runner-1"


def _commits(root: Path) -> list[str]:
    """The repository's commits on main, oldest first (c0 ... c5)."""
    return _git(root, "rev-list", "--reverse", "main").split()


def _git(root: Path, *args: str) -> str:
    command = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with six commits on main (c0 ... c5), which the gate takes for its own checkout."""
    root = tmp_path / "repo"
    (root / "ci").mkdir(parents=True)
    (root / "ci" / "requirements.lock").write_text("torch==2\n")
    (root / "gate.yaml").write_text(yaml.safe_dump({"name": "g", "train": {"seeds": [0, 1, 2]}, "runs": []}))
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "c0")
    for i in range(1, 6):
        (root / "code.txt").write_text(f"{i}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"c{i}")
    monkeypatch.setattr(gate, "repository", lambda: root)
    monkeypatch.setattr(gate, "check_side_imports", lambda side: None)
    monkeypatch.setattr(gate, "host_cpu_seconds", lambda: None)
    monkeypatch.chdir(root)
    return root


def _values(speed: float) -> dict:
    return {"images_per_s": speed, "step_p50": 64 / speed, "comm_bytes": 5, "model_digest": "same"}


def synthetic_step(repo: Path, tmp_path: Path, i: int, change_pct: float, history: Path, machine: str = MACHINE) -> Path:
    """Commit c_i measured against c_(i-1), B slower by ``change_pct`` (exactly, on average over the pairs): the gate's
    own verdicts (gate.speed_verdicts, gate.quality_verdicts), its own gate.json (gate.finish) and its own append."""
    commits = _commits(repo)
    settings = gate.Settings(scenario=repo / "gate.yaml", out=tmp_path / f"gate{i}-{machine}", history=history)
    ratio = 1 + change_pct / 100
    pairs = []
    for k, eps in enumerate(NOISE):
        a = 1000.0 * (1 + 0.01 * k)
        b = a / (ratio * math.exp(eps))
        dirs = {key: settings.out / f"pair{k:02d}" / key for key in "AB"}
        pairs.append({"pair": k, "seed": k % 3, "order": "AB", "A": {"r0": _values(a)}, "B": {"r0": _values(b)}})
        pairs[-1].update(dirs=dirs, seconds=1.0, foreign_cores={})
    verdicts = gate.speed_verdicts(pairs, settings) + gate.quality_verdicts(pairs, settings, None)
    verdict = paired.overall([v["verdict"] for v in verdicts])
    sides = {
        "A": gate_sides.Side("baseline", f"c{i - 1}", commits[i - 1], repo, Path("python")),
        "B": gate_sides.Side("candidate", "HEAD", commits[i], repo, Path("python")),
    }
    result = gate.finish(settings, verdict, "", sides, pairs, verdicts, time.monotonic())
    assert result.verdict == paired.PASS or change_pct >= 10, result.verdicts  # every small step passes its gate
    path = record_history(history, result, machine, repo)
    assert path is not None
    return path


def _show(history: Path, *more: str) -> list[str]:
    return ["gate-history", "show", "--history", str(history), "--branch", "main", "--machine", MACHINE, *more]


# --- five commits, each 5 % slower: every gate passes, the history fails -----------------------------------


def fake_workload(commits: list[str]):
    """The workload of commit c_k runs at 1000 / 1.05^k images/s, with the same noise pattern each pair."""
    count = {"n": 0}

    def run(side, scenario, out, timeout):
        k = commits.index(side.commit)
        eps = NOISE[count["n"] // 2 % len(NOISE)] if side.name == "candidate" else 0.0
        count["n"] += 1
        speed = 1000 / 1.05**k / math.exp(eps)
        out.mkdir(parents=True, exist_ok=True)
        return {"r0": new_record({"images_per_s": speed, "telemetry": {"step_p50": 64 / speed}, "model_digest": "same"})}

    return run


def test_five_commits_each_5pct_slower_pass_every_gate_and_fail_the_history(repo, tmp_path, monkeypatch, capsys, caplog):
    commits, history = _commits(repo), tmp_path / "history"
    caplog.set_level(logging.INFO, logger="suite.tools.gate_history")
    monkeypatch.setattr(gate, "run_workload", fake_workload(commits))
    for i in range(1, 6):
        _git(repo, "checkout", "-q", commits[i])
        out = tmp_path / f"gate{i}"
        code = main(["gate", "--baseline", commits[i - 1], "--scenario", str(repo / "gate.yaml"), "--out", str(out),
                     "--history", str(history), "--machine", MACHINE])  # fmt: skip
        speed = next(v for v in json.loads((out / "gate.json").read_text())["verdicts"] if v["metric"] == "images_per_s")
        assert code == 0 and speed["verdict"] == "PASS" and speed["change_pct"] == pytest.approx(5, abs=0.01)
        assert f"gate history: appended {history / MACHINE / commits[i][:8]}-" in caplog.text
    _git(repo, "checkout", "-q", "main")
    capsys.readouterr()
    assert sorted(p.name for p in (history / MACHINE).iterdir()) == sorted(
        [f"{c[:8]}-{env_name()}.json" for c in commits[1:]] + ["machine.json"]
    )
    assert main(_show(history)) == 1
    out = capsys.readouterr().out
    fail = next(line for line in out.splitlines() if line.startswith("FAIL: gate.r0.images_per_s"))
    assert f"+27.6 % since {commits[0][:10]}" in fail  # 1.05^5 - 1
    assert "beyond the 10 % threshold, though each of its 5 steps passed the gate" in fail
    assert f"PASS: gate.r0.fid +0 FID since {commits[0][:10]} [+0 FID, +0 FID]: identical models at every step" in out


def test_the_history_is_asvs_results_format(repo, tmp_path):
    history = tmp_path / "history"
    path = synthetic_step(repo, tmp_path, 1, 5.0, history)
    doc = json.loads(path.read_text())
    assert doc["version"] == 2 and doc["commit_hash"] == _commits(repo)[1] and doc["env_name"] == env_name()
    assert doc["params"]["machine"] == MACHINE and doc["date"] > 1e12  # the commit's date, a JavaScript timestamp
    row = dict(zip(doc["result_columns"], doc["results"]["gate.r0.images_per_s"]))
    assert row["result"][0] == pytest.approx(5.0) and row["stats_ci_99_a"][0] < 5 < row["stats_ci_99_b"][0]
    assert row["stats_repeat"] == [5] and len(row["samples"][0]) == 5
    machine = json.loads((history / MACHINE / "machine.json").read_text())
    assert machine["version"] == 1 and machine["machine"] == MACHINE and {"os", "arch", "cpu", "num_cpu", "ram"} <= set(machine)
    benchmarks = json.loads((history / "benchmarks.json").read_text())
    assert benchmarks["version"] == 2 and benchmarks["gate.r0.images_per_s"]["type"] == "track"
    assert doc["gate"]["baseline_commit"] == _commits(repo)[0]


def test_a_run_that_measured_no_commit_is_not_appended(repo, tmp_path):
    synthetic_step(repo, tmp_path, 1, 5.0, tmp_path / "h")
    written = json.loads((tmp_path / f"gate1-{MACHINE}" / "gate.json").read_text())
    cases = [json.loads(json.dumps(written)) for _ in range(4)]
    cases[0]["sides"]["B"]["label"] = "HEAD with uncommitted changes"  # --allow-dirty: not the commit's code
    cases[1]["sides"]["A"]["commit"] = cases[1]["sides"]["B"]["commit"]  # A/A
    cases[2]["settings"]["inject_slowdown"] = 0.15  # measures the gate
    cases[3]["verdict"] = "ERROR"
    for case in cases:
        assert record_history(tmp_path / "other", gate.GateResult(**case), MACHINE, repo) is None
    assert not (tmp_path / "other").exists()
    assert record_history(tmp_path / "other", gate.GateResult(**written), MACHINE, repo) is not None


def test_a_history_that_cannot_be_written_is_one_warning_and_the_verdict_stands(repo, tmp_path, caplog):
    synthetic_step(repo, tmp_path, 1, 5.0, tmp_path / "h")
    result = gate.GateResult(**json.loads((tmp_path / f"gate1-{MACHINE}" / "gate.json").read_text()))
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="suite.tools.gate_history"):
        assert record_history(blocked, result, MACHINE, repo) is None
    assert [r.getMessage().startswith(f"gate history: not appended to {blocked}: ") for r in caplog.records] == [True]
    assert result.verdict == "PASS" and blocked.read_text() == "not a folder"


# --- bisect ------------------------------------------------------------------------------------------------


def test_bisect_names_the_largest_step_and_the_first_commit_past_the_threshold(repo, tmp_path, capsys):
    history = tmp_path / "history"
    for i, change in enumerate((0.0, 0.0, 9.0, 0.0, 3.0), start=1):
        synthetic_step(repo, tmp_path, i, change, history)
    series = build_series(read_history(history), repo, "main", None, (MACHINE, env_name()), (10.0, 0.05))
    moved = {m.name: m for m in bisect(series)}["gate.r0.images_per_s"]
    assert moved.largest.commit == _commits(repo)[3] and moved.first_over.commit == _commits(repo)[5]
    assert main(["gate-history", "bisect", "--history", str(history), "--branch", "main", "--machine", MACHINE]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("gate.r0.images_per_s"))
    assert f"largest step at {_commits(repo)[3][:10]} (+9.0 % against {_commits(repo)[2][:10]})" in line
    assert f"first passes the 10 % threshold at {_commits(repo)[5][:10]} (+12.3 %)" in line


def test_since_counts_the_change_from_the_chosen_commit(repo, tmp_path, capsys):
    history = tmp_path / "history"
    for i in range(1, 6):
        synthetic_step(repo, tmp_path, i, 5.0, history)
    assert main(_show(history, "--since", _commits(repo)[4])) == 0  # one step of +5 % since c4
    assert f"PASS: gate.r0.images_per_s +5.0 % since {_commits(repo)[4][:10]}" in capsys.readouterr().out
    assert main(_show(history, "--since", "no-such-ref")) == 2
    assert capsys.readouterr().err.strip() == f"error: --since: no revision named 'no-such-ref' in {repo}"


# --- a history from elsewhere ------------------------------------------------------------------------------


def test_another_machines_steps_are_named_and_not_mixed(repo, tmp_path, capsys):
    history = tmp_path / "history"
    for i in (1, 2):
        synthetic_step(repo, tmp_path, i, 1.0, history)
    for i in (3, 4, 5):
        synthetic_step(repo, tmp_path, i, 9.0, history, machine="laptop")  # mixed in, the series would fail
    code = main(_show(history))
    captured = capsys.readouterr()
    assert code == 0 and f"PASS: gate.r0.images_per_s +2.0 % since {_commits(repo)[0][:10]}" in captured.out
    assert f"warning: 3 step(s) of machine 'laptop', environment '{env_name()}': not mixed into '{MACHINE}'" in captured.err
    assert "(--machine laptop --env gate-suite" in captured.err
    assert main([*_show(history)[:-1], "laptop", "--since", _commits(repo)[2]]) == 1  # its own series: +29.5 %
    assert f"FAIL: gate.r0.images_per_s +29.5 % since {_commits(repo)[2][:10]}" in capsys.readouterr().out


def test_a_file_moved_from_another_machine_or_of_another_suite_version_is_named_and_left_out(repo, tmp_path):
    history = tmp_path / "history"
    for i in (1, 2):
        synthetic_step(repo, tmp_path, i, 1.0, history)
    moved = history / MACHINE / "feedface-moved.json"
    doc = json.loads(next((history / MACHINE).glob(f"{_commits(repo)[1][:8]}-*.json")).read_text())
    moved.write_text(json.dumps({**doc, "params": {**doc["params"], "machine": "laptop"}}))
    old = history / MACHINE / "0ldf0rmat-gate-suite0.0.1.json"
    old.write_text(json.dumps({**doc, "gate": {**doc["gate"], "format": 0}}))
    read = read_history(history)
    assert len(read.steps) == 2 and all(s.machine == MACHINE for s in read.steps)
    assert (
        f"{moved}: params.machine: written on machine 'laptop', found in machine '{MACHINE}''s folder; not mixed; left out"
        in read.problems
    )
    assert f"{old}: gate.format: 0, not 1 (a history of another suite version); left out" in read.problems


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda text: text[: len(text) // 2], "not valid JSON"),
        (lambda text: text.replace('"version": 2', '"version": 3'), "version: 3, not asv's results format 2"),
        (lambda text: text.replace('"stats_repeat"', '"repeats"'), "result_columns: not asv's result columns"),
        (lambda text: "[" * 100 + "]" * 100, "nested more than 64 levels deep"),
    ],
)
def test_a_damaged_file_is_named_in_one_line_and_left_out_and_the_gate_still_appends(repo, tmp_path, capsys, damage, reason):
    history = tmp_path / "history"
    paths = [synthetic_step(repo, tmp_path, i, 5.0, history) for i in (1, 2, 3)]
    paths[1].write_text(damage(paths[1].read_text()))
    (history / "benchmarks.json").write_text("{broken")
    synthetic_step(repo, tmp_path, 4, 5.0, history)  # the gate appends beside the damaged file, and mends benchmarks.json
    assert "gate.r0.images_per_s" in json.loads((history / "benchmarks.json").read_text())
    code = main(_show(history, "--since", _commits(repo)[2]))
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if str(paths[1]) in line]
    assert len(warnings) == 1 and reason in warnings[0] and warnings[0].endswith("; left out")
    # c2's step is left out: c3 and c4 chain from c2 (the --since commit): +10.25 % over two steps of +5 %
    two = f"{100 * (1.05**2 - 1):+.1f} %"
    assert code == 1 and f"FAIL: gate.r0.images_per_s {two} since {_commits(repo)[2][:10]}" in captured.out


def test_a_link_in_the_history_is_not_followed(repo, tmp_path):
    history = tmp_path / "history"
    synthetic_step(repo, tmp_path, 1, 5.0, history)
    elsewhere = tmp_path / "elsewhere"
    synthetic_step(repo, tmp_path, 2, 50.0, elsewhere, machine="m2")
    (history / "m2").symlink_to(elsewhere / "m2")
    (history / MACHINE / "planted.json").symlink_to(next((elsewhere / "m2").glob("*-gate-*.json")))
    read = read_history(history)
    assert [s.commit for s in read.steps] == [_commits(repo)[1]]
    assert f"{history / 'm2'}: a symbolic link; not followed, left out" in read.problems
    assert f"{history / MACHINE / 'planted.json'}: a symbolic link; not followed; left out" in read.problems


def test_a_machine_name_that_would_leave_the_history_folder_is_refused(repo, tmp_path, capsys):
    with pytest.raises(ValueError, match="--machine: '../x' is not a safe name"):
        append_step(tmp_path / "h", None, "../x")  # type: ignore[arg-type]
    argv = ["gate", "--scenario", str(repo / "gate.yaml"), "--out", str(tmp_path / "o"), "--machine", "../up"]
    assert main(argv) == 2 and "--machine: '../up' is not a safe name" in capsys.readouterr().err
    assert main(_show(tmp_path / "h", "--env", "../e")) == 2
    assert "--env: '../e' is not a safe name" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "up").exists()


def test_the_history_holds_the_gates_own_mean_and_bound(repo, tmp_path):
    from scipy import stats

    synthetic_step(repo, tmp_path, 1, 5.0, tmp_path / "h")
    value = read_history(tmp_path / "h").steps[0].values["gate.r0.images_per_s"]
    gate_json = json.loads((tmp_path / f"gate1-{MACHINE}" / "gate.json").read_text())
    row = next(v for v in gate_json["verdicts"] if v["metric"] == "images_per_s")
    assert value.n == row["pairs"] == 5 and value.verdict == row["verdict"] == "PASS"
    assert 100 * math.expm1(value.mean) == pytest.approx(row["change_pct"], rel=1e-9)
    assert 100 * math.expm1(value.mean + stats.t.ppf(0.95, 4) * value.se) == pytest.approx(row["upper_pct"], rel=1e-9)


def _leaves(data, path=()):
    """Every path to a value in nested dicts and lists."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield (*path, key)
        yield from _leaves(value, (*path, key))


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def test_a_mutated_step_is_read_or_named_never_a_crash(repo, tmp_path):
    from suite.tools.gate_history_read import Damaged, parse_step

    path = synthetic_step(repo, tmp_path, 1, 5.0, tmp_path / "h")
    original = json.loads(path.read_text())
    paths = sorted(_leaves(original), key=str)

    @given(st.lists(st.tuples(st.sampled_from(paths), st.one_of(st.just("delete"), HOSTILE)), min_size=1, max_size=3))
    @settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    def check(mutations):
        doc = json.loads(json.dumps(original))
        for where, value in mutations:
            target = doc
            try:
                for key in where[:-1]:
                    target = target[key]
                if value == "delete" and isinstance(target, dict):
                    target.pop(where[-1], None)
                elif value != "delete":
                    target[where[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation removed the way there
        try:
            step = parse_step(doc, MACHINE, str(path))
        except Damaged as error:
            assert "\n" not in str(error) and str(error)
            return
        for value in step.values.values():
            assert math.isfinite(value.mean) and math.isfinite(value.se) and value.se >= 0 and value.n >= 2

    check()
