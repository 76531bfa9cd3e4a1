"""Counts a record's writes, reads and changes of form in every process of a ``suite run`` (the launcher's, each
rank's): put this folder first on ``PYTHONPATH`` and name a log file in ``RECORD_IO_LOG``. Each call of a counted function (not those it makes of
itself) appends one JSON line: the function, the run it concerns and the process that made it (a rank, the
launcher, the report).

Counted: ``results.write_record`` / ``read_record`` (a record's file written / read; ``found``: whether there was a
file to read), ``codec.parse_record`` (data to a record: the full check) and ``codec.record_data`` (a record to data), ``parts.assemble`` / ``parts.completed``
(a record made from parts / completed with more)."""

import functools
import importlib.abc
import json
import os
import sys
import threading
from pathlib import Path

COUNTED = {
    "suite.records.results": ("write_record", "read_record"),
    "suite.records.codec": ("parse_record", "record_data"),
    "suite.records.parts": ("assemble", "completed"),
}
_LOG = os.environ.get("RECORD_IO_LOG")
_depth = threading.local()


def _run_of(name, args):
    """The run id a call concerns, from its first arguments."""
    if name in ("write_record", "read_record"):
        return Path(args[0]).name
    if name in ("record_data", "completed"):
        return getattr(args[0], "run_id", None)
    source = str(args[1] if name == "parse_record" and len(args) > 1 else args[0] if name == "assemble" else "")
    parts = Path(source.split(":")[0]).parts
    return parts[-2] if len(parts) >= 2 and parts[-1].endswith(".json") else source.split(":")[0]


def _process():
    """Which process of the run: a rank (the worker), the report or the launcher (``suite run``)."""
    if Path(sys.argv[0]).stem == "worker" or "suite.running.worker" in sys.argv:
        return "rank"
    return "report" if "report" in sys.argv[1:3] else "launcher"


def _counted(name, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        depth = getattr(_depth, name, 0)
        if depth == 0:
            line = {"fn": name, "run": _run_of(name, args), "process": _process()}
            if name == "read_record":  # a look for a record that is not there reads nothing
                line["found"] = os.path.lexists(Path(args[0]) / "result.json")
            with open(_LOG, "a") as log:
                log.write(json.dumps(line) + "\n")
        setattr(_depth, name, depth + 1)
        try:
            return function(*args, **kwargs)
        finally:
            setattr(_depth, name, depth)

    return wrapper


class _Counting(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in COUNTED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            for name in COUNTED[fullname]:
                setattr(module, name, _counted(name, getattr(module, name)))

        spec.loader.exec_module = exec_module
        return spec


if _LOG:
    sys.meta_path.insert(0, _Counting())
