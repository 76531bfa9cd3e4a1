"""The projection checked on a real link: fitted on one node, does it predict two nodes?

Run inside a cluster that ``ci/cluster/cluster.sh up STATE`` built (root; a few minutes)::

    python ci/cluster/projection_check.py STATE reports/cluster-projection.md

On node1 alone (``--launcher local``) it runs the data-parallel baseline and the DC-CGAN
(``conditional``) at P = 1 and 2 with the MPI engine and fits the cost model of ``suite project``
on them (:func:`suite.projection.fit_all`). Then, for each link bandwidth (``tc tbf``: 1 Gbit/s,
100 Mbit/s), it runs them at P = 2 with one rank on each node (``--launcher mpirun``), and the
label-partitioned DC-CGAN as well, and predicts each two-node run's training window from the
one-node model and a network whose link between nodes is the shaped bandwidth (nominal
latency :data:`ALPHA_S`). It writes the predicted-against-measured table, with the payload the
engines counted (``comm.bytes``) and the bytes the link counted, to the report named.
Threads per rank are fixed at 1 everywhere, so that the two nodes (which share this machine's
cores) compute as the one-node runs did.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from suite.analysis.projection.fit import config_key, fit_all, model_name, problem_of  # noqa: E402
from suite.analysis.projection.model import predict  # noqa: E402
from suite.measure.network import Link, Network  # noqa: E402
from suite.records.results import iter_records  # noqa: E402

RATES = {"1gbit": 1e9, "100mbit": 1e8}
ALPHA_S = 50e-6
"""Latency of one message between the nodes (TCP over a veth pair), nominal: at these message sizes
(megabytes) the bandwidth term dominates."""
PREDICTED = ("data_parallel", "conditional")
TOLERANCE = 0.15


def scenario(name: str, runs: list[dict]) -> dict:
    return {
        "name": name,
        "dataset": {"name": "digits", "image_size": 20},
        # 40 steps after 5 warm-up ones: epochs enough for a per-class GAN (2 batches of 64 per epoch) to get there too
        "train": {"epochs": 40, "steps": 40, "batch_size": 64, "warmup_steps": 5, "threads": 1},
        "metrics": {"enabled": False},
        "runs": runs,
    }


def on(state: Path, node: str, *cmd: object) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{state / 'bin'}:{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    full = ["bash", str(REPO / "ci/cluster/cluster.sh"), "on", str(state), node, *map(str, cmd)]
    return subprocess.run(full, env=env, capture_output=True, text=True, timeout=900)


def link_bytes() -> int:
    out = subprocess.run(
        ["ip", "-n", "suite-node1", "-s", "-j", "link", "show", "eth1"], capture_output=True, text=True, check=True
    )
    stats = json.loads(out.stdout)[0]["stats64"]
    return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])


def suite_run(state: Path, work: Path, name: str, runs: list[dict], out: Path, *placement: str) -> None:
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario(name, runs)))
    proc = on(state, "node1", sys.executable, "-m", "suite", "run", path, "--out", out, "-q", "--timeout", "600", *placement)
    if proc.returncode != 0:
        raise SystemExit(f"suite run {name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def fitted_on_one_node(state: Path, work: Path) -> dict:
    """The cost models ``suite project`` fits on node1's runs alone (P = 1 and 2, ``--launcher local``), by config key."""
    one = [{"strategy": s, "engine": "mpi", "procs": [1, 2]} for s in PREDICTED]
    suite_run(state, work, "one-node", one, work / "one-node")
    return {f.key: f.model for f in fit_all(list(iter_records(work / "one-node")))}


def two_node_row(state: Path, work: Path, rate: str, strategy: str, models: dict) -> dict:
    """One run of ``strategy`` at P = 2 with a rank on each node over the link shaped to ``rate``: its measured step,
    the payload the engines and the link counted, and (for :data:`PREDICTED`) the one-node model's prediction."""
    out = work / f"two-node-{rate}-{strategy}"
    before = link_bytes()
    runs = [{"strategy": strategy, "engine": "mpi", "procs": [2]}]
    suite_run(state, work, f"two-{strategy}", runs, out, "--launcher", "mpirun", "--hosts", "node1:1,node2:1")
    crossed = link_bytes() - before
    record = next(iter_records(out))
    telemetry = record.telemetry
    hosts = sorted(str(r.host) for r in (telemetry.per_rank if telemetry else None) or [])
    steps = telemetry.timed_steps if telemetry else None
    if not steps:
        raise SystemExit(f"{out}: the training window made no steps; nothing to compare")
    row = {
        "strategy": strategy,
        "link": rate,
        "hosts": "+".join(hosts),
        "measured_ms": (record.train_s or 0.0) / steps * 1000,
        "comm_bytes": record.comm.bytes if record.comm else None,
        "link_bytes": crossed,
    }
    model = models.get(config_key(record))
    if strategy in PREDICTED and model is not None:
        net = Network(f"veth {rate}", Link(ALPHA_S, 0.0), Link(ALPHA_S, 8 / RATES[rate]), 1, f"two namespaces, tc tbf {rate}")
        outcome = predict(model, problem_of(record), 2, net)
        if outcome.time is not None:
            row.update(
                predicted_ms=outcome.time / steps * 1000,
                compute_ms=(outcome.compute or 0) / steps * 1000,
                comm_ms=(outcome.comm or 0) / steps * 1000,
                error=outcome.time / (record.train_s or float("nan")) - 1,
                config=model_name(config_key(record)),
            )
    return row


def report_lines(rows: list[dict], started: float) -> tuple[list[str], int]:
    """The report's Markdown, the rows judged against :data:`TOLERANCE`; and how many failed."""
    lines = [
        "# The projection on a real link: one node's model against two nodes",
        "",
        f"`ci/cluster/projection_check.py` in the `make cluster-test` cluster, {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, "
        f"{os.cpu_count()} cores shared by both nodes. Model fitted on node1 alone (MPI engine, P = 1 and 2, `--launcher local`, "
        f"1 thread per rank, 20x20 digits, batch 64, 40 steps after 5 warm-up); predicted for P = 2 with one rank on each node "
        f"(`--launcher mpirun --hosts node1:1,node2:1`), the link between them shaped with `tc tbf` and modelled as that "
        f"bandwidth with {ALPHA_S * 1e6:.0f} us latency. Step time = training window / timed steps. Pass: within "
        f"{TOLERANCE:.0%} for the data-parallel baseline and the DC-CGAN; 0 payload bytes for label-partitioned runs (the "
        "link then carries only the launcher's and MPI's set-up).",
        "",
        "| strategy | link | ranks on | measured step (ms) | predicted (ms): compute + comm | error | comm.bytes | bytes on the link | verdict |",
        "|---|---|---|---:|---|---:|---:|---:|---|",
    ]
    failed = 0
    for r in rows:
        if r["strategy"] in PREDICTED:
            ok = r.get("error") is not None and abs(r["error"]) <= TOLERANCE
            predicted = f"{r['predicted_ms']:.1f}: {r['compute_ms']:.1f} + {r['comm_ms']:.1f}" if "predicted_ms" in r else "-"
            error = f"{r['error']:+.1%}" if r.get("error") is not None else "-"
        else:
            ok = r["comm_bytes"] == 0
            predicted, error = "(no communication)", "-"
        failed += not ok
        lines.append(
            f"| {r['strategy']} | {r['link']} | {r['hosts']} | {r['measured_ms']:.1f} | {predicted} | {error} | "
            f"{r['comm_bytes']:,} | {r['link_bytes']:,} | {'PASS' if ok else 'FAIL'} |"
        )
    lines += ["", f"{len(rows) - failed} of {len(rows)} checks pass.", ""]
    return lines, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state", type=Path, help="the cluster's folder (cluster.sh up STATE)")
    parser.add_argument("report", type=Path, help="the Markdown table to write")
    parser.add_argument("--work", type=Path, help="folder for scenarios and results (default STATE/projection)")
    args = parser.parse_args()
    state = args.state.resolve()
    work = (args.work or state / "projection").resolve()
    work.mkdir(parents=True, exist_ok=True)

    started = time.time()
    models = fitted_on_one_node(state, work)
    rows = []
    for rate in RATES:
        subprocess.run(["bash", str(REPO / "ci/cluster/cluster.sh"), "shape", str(state), rate], check=True)
        rows += [two_node_row(state, work, rate, strategy, models) for strategy in (*PREDICTED, "label_partitioned")]
    lines, failed = report_lines(rows, started)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
