"""Where a run may download its data: a scenario names no folder outside the results folder for the suite to make.

A scenario's ``dataset: {root: ELSEWHERE, download: true}`` would have torchvision write wherever its author chose
when someone else runs it. :func:`check_data_roots` refuses such a run before anything is written, in one line: a
downloading root lies inside ``--out``, the suite's data folder or its cache, or is given on the command line
(``--set dataset.root=...``: the user's own choice); docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from ..config.scenario import Run


class DataRootRefused(ValueError):
    """A scenario asks to download data into a folder outside the places a run may write; one line naming it."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_data_roots(runs: Iterable[Run], out: Path, overrides: dict[str, Any] | None) -> None:
    """Refuse (:class:`DataRootRefused`) the first run that downloads into a ``dataset.root`` outside ``out``, the
    suite's data folder and its cache, unless the command line set that root (``overrides``: ``--set``'s fields)."""
    from ..gan.data import cache_dir, default_root

    if overrides and "dataset.root" in overrides:
        return
    allowed = [Path(os.path.realpath(p)) for p in (out, default_root(), cache_dir())]
    for run in runs:
        if not run.dataset.download or not run.dataset.root:
            continue
        root = Path(os.path.realpath(os.path.expanduser(run.dataset.root)))
        if not any(_inside(root, folder) for folder in allowed):
            raise DataRootRefused(
                f"{run.run_id}: dataset.root {run.dataset.root} with download: true would make folders outside the "
                f"results folder {out} and the suite's data folder {default_root()}; a scenario does not choose where the "
                f"suite writes: give the folder on the command line (--set dataset.root={run.dataset.root}), "
                "or leave root out to download into the data folder"
            )
