"""The runs a results folder has finished keep their settings: ``suite run`` refuses to write others over them.

Before ``suite run`` writes anything, every run with a finished (``ok`` or ``diverged``) folder is compared with what
would be written (the record's ``settings``; for older records, the folder's ``run.json``); a difference stops the
command in one line naming the runs and fields, the folder unchanged. Placement and sweep order
(:data:`suite.config.scenario.PLACEMENT_FIELDS`) are not compared, nor fields one side lacks (added to the suite after
the run was made).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..config.jsonfile import read_json
from ..config.scenario import PLACEMENT_FIELDS, Run
from ..records.record import Record
from ..records.results import RUN_FILE, path_under, read_record

FINISHED = ("ok", "diverged")
"""Statuses of a run that holds a result (failed and interrupted runs are run again)."""
SHOWN = 3
"""Runs, and fields of each, that the refusal names before it says how many more there are."""


class SettingsChanged(ValueError):
    """Finished runs of a results folder would get other settings; the message names them."""


def finished_settings(run_dir: Path, record: Record | None = None) -> dict[str, Any] | None:
    """The settings a finished run was made with (placement aside), or None when ``run_dir`` holds no finished run;
    ``record``: its record as the caller holds it (None: read from the folder)."""
    record = record if record is not None else read_record(run_dir)
    if record is None or record.status not in FINISHED:
        return None
    settings = record.settings
    if settings is None and (run_dir / RUN_FILE).is_file():  # a record from before provenance
        try:
            settings = read_json(run_dir / RUN_FILE)  # bounded (nesting, size): the folder may be someone else's
        except (ValueError, OSError):
            return None
    if not isinstance(settings, dict):
        return None
    return {k: v for k, v in settings.items() if k not in PLACEMENT_FIELDS}


def as_recorded(value: Any) -> Any:
    """``value`` as a record's JSON holds it: its tuples as lists (the settings a run has, compared with those a record
    keeps)."""
    if isinstance(value, dict):
        return {key: as_recorded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_recorded(item) for item in value]
    return value


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """``field old -> new`` for every field that differs, nested mappings by dotted path; fields only one side has are skipped."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) & set(new), key=str):
            found += differences(old[key], new[key], f"{path}.{key}" if path else str(key))
        return found
    return [] if old == new else [f"{path} {json.dumps(old)} -> {json.dumps(new)}"]


def check_unchanged(
    results_dir: Path, runs: Iterable[Run], others: Iterable[Run] = (), known: Mapping[str, Record] | None = None
) -> None:
    """Raise :class:`SettingsChanged` when a finished run in ``results_dir`` would get other settings.

    ``runs`` are the runs about to be written; ``others`` the scenario's runs not selected (``--only``), compared too as
    the folder's ``scenario.yaml`` is rewritten. ``known``: records the caller wrote in this folder and holds, by run id
    (the sequential seeds' earlier blocks), not read again.
    """
    changed: list[str] = []
    known = known or {}
    for run in [*runs, *others]:
        old = finished_settings(path_under(results_dir, run.run_id), known.get(run.run_id))
        if old is None:
            continue
        fields = differences(old, as_recorded(run.settings()))
        if fields:
            more = f", and {len(fields) - SHOWN} more" if len(fields) > SHOWN else ""
            changed.append(f"{run.run_id} ({', '.join(fields[:SHOWN])}{more})")
    if changed:
        more = f", and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
        runs_were = f"{len(changed)} finished runs were" if len(changed) > 1 else "a finished run was"
        raise SettingsChanged(
            f"{results_dir}: {runs_were} made with other settings: {'; '.join(changed[:SHOWN])}{more}; "
            "a finished run's settings are never rewritten: choose another --out, or delete those run folders to run them again"
        )
