"""Finished runs are never replaced unasked: ``suite run`` skips them, and ``--rerun`` keeps the old one until the new
one is ok.

A run whose record says ``ok`` or ``diverged`` is finished (:data:`suite.running.finished.FINISHED`). ``suite run``
skips it, saying so in one line (``RUN_ID finished (ok); skipped: --rerun trains it again``), with or without
``--resume``. With ``--rerun`` it trains it again from step 0: the old run folder is first renamed, in the results
folder and through its descriptor, to ``RUN_ID.replaced-YYYYmmdd-HHMMSS`` (:func:`set_aside`), which reports and
the other readers of a results folder pass over (:func:`suite.records.results.is_set_aside`); once the new run is
``ok`` the old folder is removed, otherwise it is kept and named (:func:`settle`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ..records.nofollow import open_folder, remove_tree
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
