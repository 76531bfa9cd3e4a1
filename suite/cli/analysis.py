"""Sub-commands that read records: ``suite report``, ``suite tune``, ``suite compare``, ``suite gate`` and
``suite gate-history``, ``suite project`` and ``suite probe`` (the network the projection uses).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.escape import code_span, one_line, terminal
from ..config.names import did_you_mean_path
from .common import UsageError, options_from
from .exitcodes import ExitCode

if TYPE_CHECKING:
    from ..measure.network import Network


def cmd_report(args: argparse.Namespace) -> int:
    from ..analysis.report import write_report

    out = Path(args.out) if args.out else Path(args.results) / "report"
    path = write_report(Path(args.results), out, baselines=Path(args.baselines) if args.baselines else None)
    if args.json:
        from ..tools.json_summary import dumps, report_summary

        print(f"report written to {path}", file=sys.stderr)
        print(dumps(report_summary(path)))
    else:
        print(f"report written to {path}")
    return 0


def cmd_papers(args: argparse.Namespace) -> int:
    from ..analysis.report import DEFAULT_BASELINES
    from ..analysis.report.paper_pages import write_papers

    folders = [Path(f) for f in args.results]
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(
                f"{folder}: no such results folder{did_you_mean_path(folder)}; "
                f"run `suite run scenarios/papers/... --out {folder}` first"
            )
    baselines = Path(args.baselines) if args.baselines else DEFAULT_BASELINES
    for path in write_papers(folders, Path(args.out), baselines):
        print(f"written {path}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from ..analysis.tuning import CHOSEN_YAML, write_tuning

    out = Path(args.out) if args.out else Path(args.results) / "tuning"
    path = write_tuning(Path(args.results), out)
    print(f"tuning written to {path}; each system's chosen overrides in {out / CHOSEN_YAML}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ..analysis.compare import compare, parse_tolerances
    from ..analysis.compare_text import to_markdown

    result = compare(
        Path(args.new), Path(args.baseline), parse_tolerances(args.tolerance), allow_different_device=args.allow_different_device
    )
    print(json.dumps(result.as_dict(), indent=2) if args.json else terminal(to_markdown(result)))  # records' words: data
    return result.exit_code


def cmd_gate(args: argparse.Namespace) -> int:
    from ..tools.gate import run_gate
    from ..tools.gate_settings import GateError, Settings

    settings = options_from(
        Settings,
        args,
        scenario=Path(args.scenario),
        out=Path(args.out),
        history=None if args.no_history else Path(args.history),
    )
    try:
        result = run_gate(settings)
    except GateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print((settings.out / "gate.md").read_text())
    print(result.reason, file=sys.stderr)
    return ExitCode(result.exit_code)


HISTORY = ".asv/results"
"""Where ``suite gate`` appends its history and ``suite gate-history`` reads it: asv's default results folder."""


def cmd_gate_history(args: argparse.Namespace) -> int:
    from ..config.safe_text import SAFE_NAME
    from ..tools.gate import VERDICT_EXIT_CODES
    from ..tools.gate_history import default_machine, env_name
    from ..tools.gate_history_read import read_history
    from ..tools.gate_history_text import bisect_lines, show_lines
    from ..tools.gate_series import SeriesError, build_series
    from ..tools.gate_settings import GateError

    try:
        if not 0 < args.threshold < 100:
            raise GateError(f"--threshold: a percentage between 0 and 100, got {args.threshold}")
        if not 0 < args.alpha < 0.5:
            raise GateError(f"--alpha: between 0 and 0.5, got {args.alpha}")
        for option in ("machine", "env"):
            if getattr(args, option) is not None and not SAFE_NAME.fullmatch(getattr(args, option)):
                raise GateError(f"--{option}: {getattr(args, option)[:100]!r} is not a safe name")
        history = read_history(Path(args.history))
        where = (args.machine or default_machine(), args.env or env_name())
        series = build_series(history, Path.cwd(), args.branch, args.since, where, (args.threshold, args.alpha))
    except FileNotFoundError:
        print(f"error: --history: no gate history at {one_line(args.history)}; suite gate appends one", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except (GateError, SeriesError, OSError) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    for line in history.problems + series.notes:
        print(f"warning: {one_line(line)}", file=sys.stderr)
    if args.history_command == "bisect":
        print("\n".join(one_line(line) for line in bisect_lines(series)))
        return ExitCode.OK
    print("\n".join(one_line(line) for line in show_lines(series)))
    return VERDICT_EXIT_CODES[series.overall()]


def _int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{option}: expected comma-separated positive integers such as 1,2,4,1024, got '{text}'")
    return sorted(set(values))


def _target_network(args: argparse.Namespace, out: Path) -> Network:
    """The network to project on, from --network / --alpha --beta / --ranks-per-node (``measure`` probes into ``out``)."""
    import dataclasses

    from ..analysis.projection_defaults import DEFAULT_NETWORK
    from ..measure.network import cost_problem, with_link
    from ..running.probe import resolve

    if (args.alpha is None) != (args.beta is None):
        raise UsageError(f"--{'beta' if args.beta is None else 'alpha'}: give --alpha and --beta together")
    if args.alpha is not None:
        if args.network:
            raise UsageError("--network: give either --network or --alpha and --beta, not both")
        for option, value in (("--alpha", args.alpha), ("--beta", args.beta)):
            if (problem := cost_problem(value)) is not None:  # a projection from nan or a negative cost is no projection
                raise UsageError(f"{option}: {problem}")
        net = with_link(f"alpha {args.alpha:g} s, beta {args.beta:g} s/B", args.alpha, args.beta)
    else:
        net = resolve(args.network or DEFAULT_NETWORK, out)
    if args.ranks_per_node is not None:
        if args.ranks_per_node < 1:
            raise UsageError("--ranks-per-node: must be at least 1")
        net = dataclasses.replace(net, ranks_per_node=args.ranks_per_node)
    return net


def cmd_project(args: argparse.Namespace) -> int:
    from ..analysis.markdown import markdown_table
    from ..analysis.projection.render import local_network, percent, run_projection, write_projection
    from ..analysis.report import DEFAULT_BASELINES
    from ..records.results import atomic_write_text, read_records, staged_folder

    ranks = _int_list("--ranks", args.ranks)
    fit_procs = _int_list("--fit-procs", args.fit_procs) if args.fit_procs else None
    if not (math.isfinite(args.compute_scale) and args.compute_scale > 0):
        raise UsageError("--compute-scale: must be positive (0.01: a device 100 times faster than the measured one)")
    source = Path(args.results)
    records = read_records(source)  # a results folder, a report folder (its records.json) or a records file
    results = source if source.is_dir() else source.parent  # where probe.json is looked for; the default --out
    out = Path(args.out) if args.out else results / "projection"
    net = _target_network(args, out)
    result = run_projection(
        records,
        net,
        local_network(results, args.probe),
        ranks,
        Path(args.baselines) if args.baselines else DEFAULT_BASELINES,
        fit_procs,
        args.allreduce,
        args.compute_scale,
    )
    if result is None:
        raise UsageError(
            f"{source}: no run to fit: a fit needs an ok run with per-rank window times that is not "
            "oversubscribed (ranks x threads within the node's cores)"
        )
    with staged_folder(out) as staging:  # a full disk leaves the previous projection as it was
        lines = write_projection(result, staging)
        atomic_write_text(
            staging / "projection.md", "\n".join([f"Results: {code_span(source)} ({len(records)} runs).\n", *lines])
        )
    path = out / "projection.md"
    shown = result.validation[["run_id", "measured_s", "predicted_s", "error", "role"]]
    print(markdown_table(shown.assign(error=shown["error"].map(percent))))
    print(f"projection on {net.describe()}\nwritten to {path}")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    import json

    from ..measure.network import probe_network
    from ..running.probe import run_probe

    if args.np < 2:
        raise UsageError("--np: the probe needs at least 2 processes")
    path = run_probe(Path(args.out), args.np)
    net = probe_network(path)
    data = json.loads(path.read_text())
    print(f"{net.describe()}")
    for n, pp, ar, model in zip(data["sizes"], data["pingpong_s"], data["allreduce_s"], data["allreduce_model_s"]):
        print(
            f"{n:>10} B  one-way {pp * 1e6:10.1f} us  allreduce over {data['procs']}: measured {ar * 1e6:10.1f} us, model {model * 1e6:10.1f} us"
        )
    print(f"written to {path}")
    return 0
