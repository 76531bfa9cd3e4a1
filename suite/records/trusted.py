"""The records of a results folder that decisions may rest on: those its trusted owner wrote, for the planned runs.

A results folder may be shared (a group folder with the sticky bit lets every member add folders), so a folder's
records are not all the user's. Decisions (the sequential seeds' next block, the report's verdicts, headline and
``findings.csv``) rest only on the records :func:`trusted_records` selects; everything else is named in one line
and left out, never merged. Ownership is the kernel's word: a member cannot make a file that is the user's, nor
rename, replace or write into the user's, so a record owned by the user in a folder owned by the user was written by
the user; this does the work of a manifest of digests, whose own trust would rest on the same ownership. The rules
a record meets: docs/reliability.md (Shared results folders).
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config.scenario import PLACEMENT_FIELDS
from .codec import IDENTITY
from .nofollow import printable_path
from .record import Record
from .results import RECORD_FILE, REPLACED_MARK, is_set_aside, read_record

log = logging.getLogger(__name__)


@dataclass
class Selection:
    """The records decisions rest on, and one line for each record of the folder that was left out."""

    records: list[Record] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)
    """Lines naming finished runs that a stopped ``--rerun`` left set aside, taken from there (their new run
    has no finished record)."""


def trusted_owners(results_dir: Path) -> frozenset[int]:
    """The users whose records count: this user, and the results folder's owner when nobody else can write it."""
    owners = {os.geteuid()}
    try:
        info = os.stat(results_dir)  # as named: the results folder itself may be a link, the user's choice
    except OSError:
        return frozenset(owners)
    if not stat.S_IMODE(info.st_mode) & 0o022:
        owners.add(info.st_uid)
    return frozenset(owners)


def _owner_problem(info: os.stat_result, owners: frozenset[int]) -> str | None:
    if info.st_uid in owners:
        return None
    return f"owned by user {info.st_uid}, not by you (user {os.geteuid()}) or the results folder's owner"


def _settings_problem(record: Record, planned: Mapping[str, Any]) -> str | None:
    """Why ``record`` was not made with the ``planned`` settings (placement aside), None when it was."""
    recorded = record.settings
    if not isinstance(recorded, dict):
        return "its record holds no settings to compare with the plan's"
    fields = sorted(k for k in (set(recorded) & set(planned)) - set(PLACEMENT_FIELDS) if recorded[k] != planned[k])
    if fields:
        return f"made with other settings than this scenario plans ({', '.join(fields[:3])})"
    return None


def _folder_problem(run_dir: Path, owners: frozenset[int]) -> str | None:
    """Why the run folder ``run_dir`` and its record file are not to be read (a link, not the trusted owners'), None
    when they are; looked at without following a link."""
    info = os.stat(run_dir, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link; the suite follows no link in a results folder"
    problem = _owner_problem(info, owners)
    if problem:
        return problem
    record_info = os.stat(run_dir / RECORD_FILE, follow_symlinks=False)
    if not stat.S_ISREG(record_info.st_mode):
        return f"its {RECORD_FILE} is not a regular file"
    return _owner_problem(record_info, owners)


def _one(run_dir: Path, owners: frozenset[int], plan: Mapping[str, Mapping[str, Any]] | None) -> Record | str | None:
    """The trusted record of ``run_dir``, or the line that names it and says why it is left out (``skipped PATH: why``);
    None where it holds no record."""
    if not os.path.lexists(run_dir / RECORD_FILE):  # a file, or a folder of no run (a link's is looked at, not read)
        return None
    shown = printable_path(run_dir)
    try:
        problem = _folder_problem(run_dir, owners)
        if problem:
            return f"skipped {shown}: {problem}"
        record = read_record(run_dir, IDENTITY)
    except (OSError, ValueError) as error:
        return f"skipped {printable_path(str(error))}"  # names the file and the field
    if record is None:
        return None
    name = run_dir.name.split(REPLACED_MARK)[0]
    if record.run_id != name:
        return f"skipped {shown}: its record names run {printable_path(str(record.run_id))}, not its folder's"
    if plan is not None:
        problem = "not a run this scenario plans" if record.run_id not in plan else _settings_problem(record, plan[record.run_id])
        if problem:
            return f"skipped {shown}: {problem}"
    return record


def trusted_records(results_dir: str | os.PathLike, plan: Mapping[str, Mapping[str, Any]] | None = None) -> Selection:
    """The records of ``results_dir`` that decisions rest on (the rules: docs/reliability.md), and a line for each left out.

    ``plan``: the planned runs' settings by run id (``Run.settings()`` as a record holds them); without it any
    run the trusted owners wrote counts (``suite report``). A finished run that a stopped ``--rerun`` set aside
    (``RUN.replaced-*``) stands for its run while the run's own folder holds no finished record, named in
    :attr:`Selection.set_aside`.
    """
    root = Path(results_dir)
    owners = trusted_owners(root)
    chosen, aside = Selection(), {}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        run_dir = root / entry.name
        found = _one(run_dir, owners, plan)
        if found is None:
            continue
        if isinstance(found, str):
            chosen.left_out.append(found)
        elif is_set_aside(run_dir):
            aside[found.run_id] = (run_dir, found)  # sorted by name: the latest set aside wins
        else:
            chosen.records.append(found)
    finished = {r.run_id for r in chosen.records if r.status in ("ok", "diverged")}
    for run_id, (run_dir, record) in sorted(aside.items()):
        if run_id in finished or record.status not in ("ok", "diverged"):
            continue
        chosen.records = [r for r in chosen.records if r.run_id != run_id] + [record]
        chosen.set_aside.append(
            f"{run_id}: a stopped --rerun left its finished run in {printable_path(run_dir)}; it stands for the run "
            "here, and the next `suite run` of the folder puts it back"
        )
    return chosen
