"""Finished runs are never replaced unasked: ``suite run`` skips them, and ``--rerun`` keeps the old one until the new
one is ok.

With ``--rerun`` the old run folder is set aside as ``RUN_ID.replaced-YYYYmmdd-HHMMSS`` (:func:`set_aside`), removed
once the new run is ok and otherwise kept and named (:func:`settle`); a ``--rerun`` stopped midway leaves it aside
until the next ``suite run`` puts it back (:func:`put_back`), unless that one is ``--rerun --resume``
(docs/results.md, docs/reliability.md).
"""

from __future__ import annotations

import glob
import logging
import os
import time
from pathlib import Path

from ..records.nofollow import open_folder, printable_path, remove_tree
from ..records.results import REPLACED_MARK, read_record
from .finished import FINISHED

log = logging.getLogger("suite")


def finished_status(run_dir: Path) -> str | None:
    """The status of the finished run in ``run_dir`` (``ok`` or ``diverged``), or None where it holds none."""
    record = read_record(run_dir)
    return record.status if record is not None and record.status in FINISHED else None


def skipped_line(run_id: str, status: str) -> str:
    """What ``suite run`` says of a finished run it does not train again."""
    return f"{run_id} finished ({status}); skipped: --rerun trains it again"


def set_aside(run_dir: Path) -> Path:
    """Rename the finished run folder ``run_dir`` to ``RUN_ID.replaced-TIMESTAMP`` beside it, through the results folder's
    descriptor (no link followed; an existing name is never replaced); return the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fd = open_folder(run_dir.parent)
    try:
        for attempt in range(100):
            name = f"{run_dir.name}{REPLACED_MARK}{stamp}" + (f"-{attempt}" if attempt else "")
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                os.rename(run_dir.name, name, src_dir_fd=fd, dst_dir_fd=fd)
                return run_dir.parent / name
        raise FileExistsError(f"{run_dir}: 100 folders set aside at {stamp} already; remove some")
    finally:
        os.close(fd)


def settle(run_id: str, aside: Path, status: str | None) -> str:
    """After the new run of ``run_id`` ended with ``status``: remove the old run's folder ``aside`` when it is ``ok``
    (never following a link); otherwise keep it. Returns the line that says which."""
    if status == "ok":
        remove_tree(aside)
        return f"{run_id}: the run it replaces is removed"
    return f"{run_id}: the finished run it was to replace is kept in {aside}"


def left_aside(run_dir: Path) -> Path | None:
    """The newest folder set aside for the run of ``run_dir`` by a ``--rerun`` that did not settle it, None where none
    (a link of that name is not one: the suite follows no link in a results folder)."""
    found = [
        path
        for path in run_dir.parent.glob(f"{glob.escape(run_dir.name)}{REPLACED_MARK}*")
        if path.is_dir() and not path.is_symlink()
    ]
    return max(found, key=lambda p: (len(p.name), p.name)) if found else None


def stopped_line(run_dir: Path) -> str | None:
    """What a sweep stopped during the ``--rerun`` of ``run_dir`` says of the old run, None where none is set aside."""
    aside = left_aside(run_dir)
    if aside is None:
        return None
    return (
        f"the finished run it was to replace is kept in {printable_path(aside)}; the next `suite run` puts it back "
        "(`--rerun --resume` continues the new run instead)"
    )


def put_back(run_dir: Path, continuing: bool) -> str | None:
    """Settle what a stopped ``--rerun`` left for the run of ``run_dir``; return the line that says what was done, None
    where nothing was set aside.

    Its new run ``ok``: the old folder is removed, as :func:`settle` would have. Otherwise the old, finished run is put
    back in its place (the new run's folder, an unfinished training, removed), unless ``continuing`` (``--rerun
    --resume``): then both stay, and the sweep settles the old one when the new one ends.
    """
    aside = left_aside(run_dir)
    if aside is None:
        return None
    status = finished_status(run_dir)
    if status is not None:
        return settle(run_dir.name, aside, status)
    if continuing:
        return f"{run_dir.name}: --rerun --resume continues the new run; the finished run it replaces stays in {aside}"
    remove_tree(run_dir)
    fd = open_folder(run_dir.parent)
    try:
        os.rename(aside.name, run_dir.name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    return (
        f"{run_dir.name}: put back the finished run that a stopped --rerun had set aside in {printable_path(aside)} "
        "(the new run it began is removed; --rerun trains it again)"
    )
