"""Who failed, where and how: rank status files, the launchers' failure messages, one line.

Every rank writes ``RUN_DIR/ranks/rank<N>.json`` when it starts (host, pid, ``status:
running``) and again when its state changes: ``failed`` (with the exception's line and
traceback), ``trained`` (its last checkpoint, with training over), ``stopped`` (checkpointed on
request, see :mod:`suite.train.checkpoint`). When a launch ends badly, ``suite run`` reads these files
and the launcher's output (``log.txt``) and starts the record's ``error`` with one line::

    rank 1 on node3 was killed by SIGKILL
    rank 1 on node3 exited with code 1: RuntimeError: CUDA out of memory ...

The launchers name the ranks they saw end (Open MPI's ``prterun noticed that process rank
1 ... exited on signal 9``, horovodrun's ``Process 1 exit with status code 137``, torchrun's
failure entries, deepspeed's and srun's lines); the status files add the host and, for a rank
that raised, its exception. When one rank fails, the others soon fail too, of the lost peer
("Connection reset by peer" from Gloo, NCCL's remote errors), and a launcher may see one of
those first. The rank named is therefore, in this order: the first rank that raised an error of
its own (by its status file's time); a rank a launcher saw killed by a signal it did not send to
stop the others (not SIGTERM, SIGINT or SIGHUP); a rank whose peer Open MPI says disconnected
while its status file still says running (across nodes mpirun may end before the peer's node
reports its signal: ``rank 1 on node2 died without a word: ...``); the first rank the launcher
names; the first rank that failed by its status file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.jsonfile import JsonError, read_json
from ..config.shown import shown
from .results import RANKS_DIR, atomic_write_text

log = logging.getLogger(__name__)

# what shells and launchers say for a signal (strsignal: "Killed", "Terminated", "Segmentation fault", ...)
_SIGNAL_WORDS = {word.lower(): int(s) for s in signal.Signals if (word := signal.strsignal(s))}


def status_path(run_dir: Path, rank: int) -> Path:
    """The status file of ``rank``."""
    return Path(run_dir) / RANKS_DIR / f"rank{rank}.json"


def write_status(run_dir: Path, rank: int, status: str, **fields: Any) -> None:
    """Record this process as ``rank`` of the run with ``status`` (atomically; host and pid added)."""
    entry = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(), "status": status, "time": time.time(), **fields}
    atomic_write_text(status_path(run_dir, rank), json.dumps(entry))


RANK_STATUSES = ("running", "failed", "trained", "stopped", "diverged")
"""What a rank's status file says of it (see the module)."""
_STATUS_FILE = re.compile(r"rank(\d+)\.json")
_STATUS_BYTES = 16 << 20
_warned: set[str] = set()


def status_problem(entry: Any, rank: int) -> str | None:
    """Why ``entry`` (a status file's data, named for ``rank``) is not a rank's status, naming the field; None if it is."""
    if not isinstance(entry, dict):
        return f"expected a JSON object (a rank's status), got {type(entry).__name__}"
    if entry.get("rank") != rank or isinstance(entry.get("rank"), bool):
        return f"rank: expected {rank}, the rank its name gives, got {shown(entry.get('rank'))}"
    if entry.get("status") not in RANK_STATUSES:
        return f"status: expected one of {', '.join(RANK_STATUSES)}, got {shown(entry.get('status'))}"
    number = entry.get("time")
    if not isinstance(number, (int, float)) or isinstance(number, bool):
        return f"time: expected a number (seconds since the epoch), got {shown(number)}"
    for name, kind in (("pid", int), ("host", str), ("error", str), ("traceback", str)):
        value = entry.get(name)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"{name}: expected {'an integer' if kind is int else 'a string'}, got {shown(value)}"
    return None


def read_statuses(run_dir: Path) -> dict[int, dict]:
    """Every rank's latest status, by rank (ranks that never started are missing).

    A status file that is not one (someone else's, or damaged) is left out, with one warning line naming the file
    and the field (once per file): the failure is then named from the launcher's output alone.
    """
    statuses = {}
    for path in (Path(run_dir) / RANKS_DIR).glob("rank*.json"):
        match = _STATUS_FILE.fullmatch(path.name)
        if match is None:
            continue
        try:
            entry = read_json(path, max_bytes=_STATUS_BYTES)
        except OSError:  # a file being replaced: its rank is not needed to name a failure
            continue
        except JsonError as error:
            problem: str | None = error.reason
        else:
            problem = status_problem(entry, int(match[1]))
        if problem is not None:
            if str(path) not in _warned:
                _warned.add(str(path))
                log.warning("%s: not a rank's status file, left out (%s)", path, problem)
            continue
        statuses[int(match[1])] = entry
    return statuses


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal N`` for numbers Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class Failure:
    """The first rank that ended a run: who, where, and how (an exit code or a signal)."""

    rank: int | None
    host: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    message: str | None = None  # the exception of a rank that raised
    vanished: bool = False
    """Ended with no word of its own and no exit status from the launcher; ``message`` says who saw it go."""

    def line(self) -> str:
        """One line: ``rank 1 on node3 was killed by SIGKILL``."""
        who = f"rank {self.rank}" if self.rank is not None else "a rank"
        where = f" on {self.host}" if self.host else ""
        if self.signal is not None:
            return f"{who}{where} was killed by {signal_name(self.signal)}"
        if self.vanished:
            return f"{who}{where} died without a word: {self.message}"
        code = f"exited with code {self.exit_code if self.exit_code is not None else 1}"
        return f"{who}{where} {code}" + (f": {self.message}" if self.message else "")

    def as_dict(self) -> dict:
        """The record's ``failure`` field."""
        return {
            "rank": self.rank,
            "host": self.host,
            "exit_code": self.exit_code,
            "signal": signal_name(self.signal) if self.signal is not None else None,
            "message": self.message,
        }


def _exit_status(code: int, shell: bool) -> tuple[int | None, int | None]:
    """(exit code, signal) from a launcher's number: negative is a signal (Python's convention); above 128
    through a shell (horovodrun, srun's bash) is 128 + the signal."""
    if code < 0:
        return None, -code
    if shell and 128 < code < 128 + 65:
        return None, code - 128
    return code, None


def _horovodrun(m: re.Match) -> Failure:
    return Failure(int(m["rank"]), None, *_exit_status(int(m["code"]), shell=True))


def _torchrun(m: re.Match) -> Failure:
    return Failure(int(m["rank"]), m["host"], *_exit_status(int(m["code"]), shell=False))


def _srun(m: re.Match) -> Failure:
    how = m["how"].strip()
    code = re.match(r"Exited with exit code (\d+)", how)
    if code:
        return Failure(int(m["rank"]), m["host"], int(code[1]))
    return Failure(int(m["rank"]), m["host"], None, _SIGNAL_WORDS.get(how.lower()))


_TORCHRUN_ENTRY = (
    r"\[\d+\]:\s+time\s*:[^\n]*\n\s+host\s*:\s*(?P<host>\S+)\s+"
    r"rank\s*:\s*(?P<rank>\d+)[^\n]*\n\s+exitcode\s*:\s*(?P<code>-?\d+)"
)

# (pattern, reader): each finds the first failed rank in that launcher's own words
_LAUNCHER_MESSAGES = [
    (
        re.compile(r"process rank (?P<rank>\d+) with PID \d+ on\s+node (?P<host>\S+) exited on\s+signal (?P<signal>\d+)"),
        lambda m: Failure(int(m["rank"]), m["host"], None, int(m["signal"])),
    ),
    (
        re.compile(r"Process name: \[[^\]]*?,(?P<rank>\d+)\]\s+Exit code:\s+(?P<code>\d+)"),
        lambda m: Failure(int(m["rank"]), None, int(m["code"])),
    ),
    (
        re.compile(r"process rank (?P<rank>\d+) with PID \d+ on\s+node (?P<host>\S+) exited with\s+status (?P<code>\d+)"),
        lambda m: Failure(int(m["rank"]), m["host"], int(m["code"])),
    ),
    (
        re.compile(
            r"MPI_ABORT was invoked on rank (?P<rank>\d+) in communicator \S+\s+(?:with errorcode|Proc:[^\n]*\n\s*Errorcode:)\s*(?P<code>-?\d+)"
        ),
        lambda m: Failure(int(m["rank"]), None, int(m["code"])),
    ),
    (re.compile(r"Process (?P<rank>\d+) exit with status code (?P<code>\d+)\."), _horovodrun),
    (re.compile(r"Root Cause \(first observed failure\):\s+" + _TORCHRUN_ENTRY), _torchrun),
    (re.compile(_TORCHRUN_ENTRY), _torchrun),  # the other failures it lists
    (re.compile(r"srun: error: (?P<host>\S+): tasks? (?P<rank>\d+)(?:-\d+)?: (?P<how>[^\n]+)"), _srun),
    # the deepspeed launcher names the return code only
    (
        re.compile(r"exits with return code = (?P<code>-?\d+)"),
        lambda m: Failure(None, None, *_exit_status(int(m["code"]), shell=False)),
    ),
]


# what launchers print when they cannot reach a node, or Slurm refuses the request: (pattern, one line)
_LAUNCH_PROBLEMS = [
    (
        re.compile(r"ssh: Could not resolve hostname (?P<host>[^\s:]+): (?P<why>[^\n]+)"),
        "host {host} is unknown (ssh: Could not resolve hostname {host}: {why})",
    ),
    (
        re.compile(r"ssh: connect to host (?P<host>\S+) port (?P<port>\d+): (?P<why>[^\n]+)"),
        "host {host} is unreachable (ssh: connect to host {host} port {port}: {why})",
    ),
    (
        re.compile(r"host=(?P<host>\S+) was not reachable via ssh"),
        "host {host} is unreachable (deepspeed: not reachable via ssh)",
    ),
    (
        re.compile(r"invalid partition specified: (?P<partition>\S+)"),
        "Slurm partition {partition} does not exist (invalid partition specified)",
    ),
]


def launch_problem(log_text: str) -> str | None:
    """One line naming the host a launcher could not reach, or the Slurm partition that does not exist
    (whichever its output names first), or None."""
    found = [(m.start(), line.format(**m.groupdict())) for pattern, line in _LAUNCH_PROBLEMS if (m := pattern.search(log_text))]
    return min(found)[1].strip() if found else None


# a rank's error that says a peer went away: the consequence of another rank's failure, not its cause
_LOST_PEER = re.compile(
    r"connection (reset|closed|refused)|broken pipe|remote (worker|process|peer)|peer (closed|disconnected)"
    r"|horovod (has been )?shut ?down|HorovodInternalError|ncclRemoteError|timed out|MPI_ERR_PROC_FAILED",
    re.IGNORECASE,
)
# Open MPI's help message on a rank whose TCP peer went away (the peer was killed, crashed or lost its node)
_OPENMPI_PEER_LOST = re.compile(
    r"peer process has unexpectedly disconnected.*?Local host:\s+(?P<local>\S+).*?Peer host:\s+(?P<peer>\S+)", re.DOTALL
)
# ...and what the aborting rank prints, with or without that help message (Open MPI does not always show it)
_OPENMPI_SOCKET_CLOSED = re.compile(r"\[(?P<local>[^:\]\s]+):\d+\] \*\*\* An error occurred in Socket closed")
# signals a launcher sends to stop the other ranks once one has failed
_STOPPING_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def launcher_failures(log_text: str) -> list[Failure]:
    """Every failed rank that the launcher's output names: torchrun's root cause first, then in the order named."""
    found = []
    for order, (pattern, reader) in enumerate(_LAUNCHER_MESSAGES):
        root_cause = "Root Cause" in pattern.pattern
        found += [(not root_cause, match.start(), order, reader(match)) for match in pattern.finditer(log_text)]
    return [failure for *_, failure in sorted(found, key=lambda f: f[:3])]


def _vanished(statuses: dict[int, dict], log_text: str) -> Failure | None:
    """The rank that Open MPI says disconnected, when it left no status of its own: the survivors abort at once
    and mpirun ends before the peer's node reports how it died (a SIGKILL, the OOM killer, a lost node)."""
    lost = _OPENMPI_PEER_LOST.search(log_text)
    closed = _OPENMPI_SOCKET_CLOSED.search(log_text)
    silent = sorted(r for r, s in statuses.items() if s.get("status") == "running")
    if lost is not None:
        local, candidates = lost["local"], [r for r in silent if statuses[r].get("host") == lost["peer"]]
    elif closed is not None:  # no peer named: only a silent rank on another host can be it, and only one
        local, candidates = closed["local"], [r for r in silent if statuses[r].get("host") != closed["local"]]
        candidates = candidates if len(candidates) == 1 else []
    else:
        return None
    if not candidates:
        return None
    host = statuses[candidates[0]].get("host")
    seen = f"its MPI peer on {local} saw the connection drop, and mpirun ended before {host} reported a signal"
    return Failure(candidates[0], host, message=seen, vanished=True)


def first_failure(run_dir: Path, log_text: str) -> Failure | None:
    """The rank that ended the run, from the launcher's output and the ranks' status files (see the module)."""
    statuses = read_statuses(run_dir)
    failed = sorted((s for s in statuses.values() if s.get("status") == "failed"), key=lambda s: s["time"])
    own_errors = [s for s in failed if not _LOST_PEER.search(s.get("error") or "")]
    named = launcher_failures(log_text)
    killed = [f for f in named if f.signal is not None and f.signal not in _STOPPING_SIGNALS]
    if own_errors:
        first = own_errors[0]["rank"]
        failure = next((f for f in named if f.rank == first and f.signal is None), Failure(first, exit_code=1))
    elif killed:
        failure = killed[0]
    elif (gone := _vanished(statuses, log_text)) is not None:
        failure = gone
    elif named:
        failure = named[0]
    elif failed:
        failure = Failure(failed[0]["rank"], exit_code=1)
    else:
        return None
    status = statuses.get(failure.rank, {}) if failure.rank is not None else {}
    if status.get("host") and failure.host in (None, "localhost"):  # torchrun says localhost; the rank knows better
        failure.host = status["host"]
    if status.get("status") == "failed" and failure.signal is None and not failure.vanished:
        failure.message = status.get("error")
    return failure
