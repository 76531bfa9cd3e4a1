"""A run record's data to and from its typed :class:`suite.records.record.Record`: the checks a record's JSON data
passes (:func:`check_record`), the one loader (:func:`parse_record`), the data written back (:func:`record_data`),
dotted paths into a record (:func:`record_field`) and the report's flat columns (:func:`flat_columns`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Callable, Mapping, TypeVar

from ..config.entries import record_part_type
from ..config.registry import STRATEGIES, PluginError
from ..config.safe_text import name_problem
from ..config.schema import SchemaError, check, convert, section_type, strip_type, type_hints
from ..config.shown import shown, shown_name
from .record import AT_TOP_LEVEL, SCHEMA_VERSION, CoreRecord, Record, RecordError
from .upgrade import upgraded

STATUSES = ("ok", "failed", "interrupted", "diverged")
"""A record's ``status``: how the run ended (see :class:`suite.records.record.RunOutcome`)."""
IDENTITY = ("run_id", "status", "strategy", "engine", "loss", "procs", "scaling")
"""The fields without which a record names no run: the report, ``suite compare`` and ``suite tune`` group by them."""
NAMES = ("run_id", "scenario", "strategy", "engine", "loss", "scaling", "label")
"""The fields that are safe names (:data:`suite.config.safe_text.SAFE_NAME`) wherever a record has them: they become
file names, markdown and words of the report."""
T = TypeVar("T")
MAX_NUMBER = 1e18
"""The largest magnitude of a number in a record (seconds, bytes, FLOP/s, images): larger is no measurement."""


def _known_part(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the keys dataclass ``cls`` (and the dataclasses it holds) does not have: an older record's
    fields that were renamed since."""
    hints = type_hints(cls)
    part: dict[str, Any] = {}
    for name, value in data.items():
        if name in hints:
            inner = section_type(hints[name])
            part[name] = _known_part(inner, value) if inner is not None and isinstance(value, dict) else value
    return part


def _number_problem(value: Any, path: str) -> str | None:
    """Where in ``value`` (a record's data, at ``path``) a number is larger than :data:`MAX_NUMBER`, or None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            stack += [(v, f"{where}.{shown_name(k)}" if where else shown_name(k)) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, f"{where}[{i}]") for i, v in enumerate(item)]
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and not abs(item) <= MAX_NUMBER:
            return f"{where}: {shown(item)} is not a measurement (at most {MAX_NUMBER:g} in size)"
    return None


REQUIRED_IN = {"quality": ("features",), "quality_best_cell": ("features",)}
"""Fields a part must have where the record has it: a score is nothing without its ruler."""


def _parts_problem(data: dict[str, Any]) -> None:
    """Raise :class:`RecordError` naming the field where a part lacks a field of :data:`REQUIRED_IN`."""
    for part, names in REQUIRED_IN.items():
        if isinstance(data.get(part), dict) and (missing := [n for n in names if data[part].get(n) is None]):
            raise RecordError(f"{part}.{missing[0]}: required field is missing")


def _steps_problem(steps: Any) -> str | None:
    """Why ``generator_steps`` (free-form in the schema) is not a whole number of steps or one per class GAN, or None."""

    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if steps is None or whole(steps) or (isinstance(steps, dict) and all(whole(v) for v in steps.values())):
        return None
    return f"generator_steps: expected a whole number of steps, or one per class GAN, got {shown(steps)}"


CORE_KEYS = frozenset(f.name for f in dataclasses.fields(CoreRecord))
"""The keys of a record's :class:`CoreRecord` fields; its strategy's part brings the others."""
MOVED_TO_PLUGINS = ("allreduce_every",)
"""Top-level fields the core record had before a plugin's record part took them over (the example plugin's
``allreduce_every``): records of every strategy wrote them null until then, and a null one reads as not there."""
LAYOUT_PART_KEYS = (
    "classes",
    "class_schedule",
    "groups",
    "process_grid",
    "cells_per_rank",
    "neighbourhood",
    "neighbourhood_size",
    "population",
    "iterations",
    "batches_per_iteration",
    "phases_s",
    "best_cell",
    "best_mixture_cell",
    "mixture_weights",
    "mixture_score",
    "ranking",
    "mixture_curve",
)
"""The record file's layout: top-level keys that every record has written since schema 3, in this order after
``STRATEGY_SLOT``, null where its run has none. They were the core record's until the built-in strategies' own fields
moved into their record parts (``label_partitioned``'s, then ``cellular``'s); a record still writes them all, so that
its file keeps the keys every tool reads, and a null one reads as not there. A field a part adds later is written in
its strategy's records only, after these."""
STRATEGY_SLOT = "replicas_identical"
"""The core field after which a record's file holds its strategy's part (:data:`LAYOUT_PART_KEYS` first)."""


def strategy_part_type(strategy: str) -> type | None:
    """The ``record_part`` of installed strategy ``strategy``'s entry (None: it brings none); :class:`PluginError`
    naming it where the part declares a field every record has."""
    part = record_part_type(STRATEGIES[strategy])
    if part is not None and (clash := [f.name for f in dataclasses.fields(part) if f.name in CORE_KEYS]):
        raise PluginError(
            f"strategy {strategy!r}: its record part {part.__name__} declares {clash[0]!r}, a field every record has"
        )
    return part


def _strategy_keys(data: dict[str, Any]) -> tuple[type | None, dict[str, Any] | None]:
    """The record part of ``data``'s strategy and the top-level keys of ``data`` that are its: those the part declares
    where the strategy is installed (and brings one); where it is a plugin's that is not installed, every key the core
    record does not declare, kept unchecked. (None, None) where the strategy brings no part or the record names none."""
    strategy = data.get("strategy")
    if not isinstance(strategy, str):
        return None, None
    if strategy not in STRATEGIES:
        keys = {name: value for name, value in data.items() if name not in CORE_KEYS}
        return None, keys or None
    part = strategy_part_type(strategy)
    if part is None:
        return None, None
    names = {f.name for f in dataclasses.fields(part)}
    return part, {name: value for name, value in data.items() if name in names}


def _without_moved_nulls(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the null :data:`MOVED_TO_PLUGINS` and :data:`LAYOUT_PART_KEYS` fields (a record's strategy's
    part holds its own, and the null ones of other strategies' parts are the file's layout)."""
    moved = (*MOVED_TO_PLUGINS, *LAYOUT_PART_KEYS)
    if not any(name in data and data[name] is None for name in moved):
        return data
    return {name: value for name, value in data.items() if not (name in moved and value is None)}


def check_record(data: Any, source: str = "record", required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` if it is a record this suite reads; :class:`RecordError` naming ``source`` and the field otherwise.

    Records of every schema version up to this one are checked against :class:`CoreRecord`, and the keys of their
    strategy's ``record_part`` (an installed plugin's) against it (:func:`_strategy_keys`; a plugin's that is not
    installed keeps the keys the core does not declare, unchecked): every field's type, ``status`` one of
    :data:`STATUSES`, the :data:`NAMES` safe names (they become file names and markdown), every number finite
    (the JSON reader refuses NaN) and at most :data:`MAX_NUMBER` in size. Older records (schema 1 and 2, the same
    layout) may hold fields renamed since, which are passed over; newer ones are refused, and so is a record without
    a ``schema`` key (read as schema 1, its images/s would be reinterpreted). ``required``: fields
    that must be there (:data:`IDENTITY` for a reader that groups runs).
    """
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object (a run record), got {type(data).__name__}")
    if "schema" not in data:  # every record the suite writes names it: read as schema 1, its numbers would change meaning
        raise RecordError(
            f"{source}: schema: required field is missing; every record the suite writes names its schema version "
            f"(1 to {SCHEMA_VERSION})"
        )
    version = data["schema"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        what = (
            f"newer than this suite reads ({SCHEMA_VERSION}); update the suite" if newer else f"not one (1 to {SCHEMA_VERSION})"
        )
        raise RecordError(f"{source}: schema: record schema {shown(version)} is {what}")
    data = _without_moved_nulls(data)
    try:
        part, keys = _strategy_keys(data)
        core = {name: value for name, value in data.items() if keys is None or name not in keys}
        check(CoreRecord, core if version >= 3 else _known_part(CoreRecord, core), "", RecordError)
        if part is not None:
            check(part, keys or {}, "", RecordError)
        missing = [name for name in required if data.get(name) is None]
        if missing:
            raise RecordError(f"{missing[0]}: required field is missing; a record names its run by {', '.join(IDENTITY)}")
        if data.get("status") is not None and data["status"] not in STATUSES:
            raise RecordError(f"status: {shown(data['status'])} is not one of {', '.join(STATUSES)}")
        for name in NAMES:
            if isinstance(data.get(name), str) and (problem := name_problem(data[name])) is not None:
                raise RecordError(f"{name}: {problem}")
        if (problem := _number_problem(data, "")) is not None:
            raise RecordError(problem)
        if (problem := _steps_problem(data.get("generator_steps"))) is not None:
            raise RecordError(problem)
        _parts_problem(data)
    except RecordError as error:
        raise RecordError(f"{source}: {error}") from None
    return upgraded(data, SCHEMA_VERSION)


def parse_record(data: Any, source: str = "record", required: tuple[str, ...] = ()) -> Record:
    """``data`` as a :class:`Record`: the one way a record's data becomes one (every reader goes through it).

    It is checked (:func:`check_record`: :class:`RecordError` naming ``source`` and the field), brought to this
    schema's meaning (:mod:`suite.records.upgrade`) and its parts built as their dataclasses, its strategy's own
    fields as its ``record_part`` (``strategy_part``); a part that takes keys it does not declare (``OPEN``) keeps
    them for :func:`record_data`, so that a record rewritten loses nothing. A missing field and a null one read the
    same: None.
    """
    checked = check_record(data, source, required)
    part, keys = _strategy_keys(checked)
    core = {name: value for name, value in checked.items() if keys is None or name not in keys}
    built: Record = _built(Record, core)
    built.strategy_part = _built(part, keys or {}) if part is not None else keys
    if part is not None:
        object.__setattr__(built.strategy_part, READ_KEYS, frozenset(keys or {}))  # a frozen part too
    built.schema = SCHEMA_VERSION  # in this schema's meaning now, whatever it was written in
    return built


EXTRAS = "_extras"
"""The attribute where a built ``OPEN`` part keeps the keys it does not declare (:func:`record_data` writes them back)."""


def _built(tp: Any, value: Any) -> Any:
    """``value``, already checked as ``tp``, with every dataclass in it built as an instance."""
    tp = strip_type(tp)
    if value is None or tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        made = tp(**{name: _built(hints[name], v) for name, v in value.items() if name in names})
        extras = {k: v for k, v in value.items() if k not in names}
        if extras:
            setattr(made, EXTRAS, extras)
        return made
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):  # the first alternative it fits, as the check chose it
        for alternative in typing.get_args(tp):
            try:
                convert(alternative, value, "", RecordError)
            except SchemaError:
                continue
            return _built(alternative, value)
        return value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_built(item, v) for v in value]
    if origin is dict:
        item = typing.get_args(tp)[1]
        return {k: _built(item, v) for k, v in value.items()}
    return value


def build_part(tp: type[T], data: Mapping[str, Any]) -> T:
    """``data``, plain data as a measurement returns it, as part ``tp`` with every dataclass in it built and the keys an
    ``OPEN`` part does not declare kept (unchecked: the record it joins is checked as a whole)."""
    built: T = _built(tp, data)
    return built


READ_KEYS = "_read_keys"
"""The attribute where a strategy's part built by :func:`parse_record` keeps the keys its record's data held."""


def _part_data(part: Any) -> dict[str, Any]:
    """A strategy's part (``Record.strategy_part``) as the top-level keys of its record's data: the fields it has, a
    value or a key its record was read with (null where the file held null), never a field it lacks, so that a field
    a part gains later leaves the records without it as they were."""
    if part is None:
        return {}
    if not (dataclasses.is_dataclass(part) and not isinstance(part, type)):
        return dict(record_data(part))  # a plugin's that is not installed: the keys as they were read
    read: frozenset[str] = getattr(part, READ_KEYS, frozenset())
    data = {
        f.name: record_data(getattr(part, f.name))
        for f in dataclasses.fields(part)
        if getattr(part, f.name) is not None or f.name in read
    }
    return data | getattr(part, EXTRAS, {})


def record_data(value: Any) -> Any:
    """A :class:`Record` (or any of its parts) as the plain data of its JSON file: every field of the core schema, null
    where the run has no value (the same keys in every record, for any tool that reads them), the keys an ``OPEN``
    part did not declare written back, and the strategy's part (:data:`AT_TOP_LEVEL`) with its keys at the top level,
    after :data:`STRATEGY_SLOT`, where they were read: :data:`LAYOUT_PART_KEYS` (null where its part has none) first,
    then only the fields the part has (:func:`_part_data`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.metadata.get(AT_TOP_LEVEL):
                own = dict.fromkeys(LAYOUT_PART_KEYS) | _part_data(item)
            else:
                data[f.name] = record_data(item)
        data.update(getattr(value, EXTRAS, {}))
        if not own:
            return data
        at = list(data).index(STRATEGY_SLOT) + 1
        items = list(data.items())
        return dict([*items[:at], *own.items(), *items[at:]])
    if isinstance(value, (list, tuple)):
        return [record_data(v) for v in value]
    if isinstance(value, dict):
        return {k: record_data(v) for k, v in value.items()}
    return value


def _field_type(cls: type, name: str) -> Any:
    """The type of field ``name`` of dataclass ``cls`` with None stripped (Any where it is free-form)."""
    tp = type_hints(cls)[name]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1 else tp


def check_path(path: str) -> None:
    """Raise :class:`RecordError` unless the dotted ``path`` names a field of :class:`Record`.

    Below a free-form field (a mapping, a list, ``Any``) any path is accepted.
    """
    cls: Any = Record
    for i, part in enumerate(path.split(".")):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return
        names = {f.name for f in dataclasses.fields(cls)}
        if part not in names:
            where = ".".join(path.split(".")[:i]) or "a record"
            raise RecordError(f"{path}: {where} has no field {part!r} (see suite/records/record.py)")
        cls = _field_type(cls, part)


def record_field(record: Record, path: str) -> Any:
    """The value at a dotted ``path`` of ``record`` (``"telemetry.step_p50"``), or None where the record has none.

    A path that the schema does not have raises :class:`RecordError`: a misspelt key fails here
    instead of giving an empty column. Below a free-form field (a mapping) the path reads its keys.
    """
    check_path(path)
    value: Any = record
    for part in path.split("."):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = getattr(value, part, None)
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def _marked(cls: type, prefix: str = "") -> dict[str, tuple[str, dataclasses.Field[Any]]]:
    """Column -> (dotted path, field) of every field of ``cls`` (and the parts it holds) marked as a column."""
    columns: dict[str, tuple[str, dataclasses.Field[Any]]] = {}
    for f in dataclasses.fields(cls):
        mark = f.metadata.get("column")
        if mark:
            columns[mark if isinstance(mark, str) else f.name] = (prefix + f.name, f)
        tp = _field_type(cls, f.name)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp) and f.name != "quality_best_cell":
            columns.update(_marked(tp, f"{prefix}{f.name}."))
    return columns


def _columns(cls: type, prefix: str = "") -> dict[str, str]:
    return {name: path for name, (path, _) in _marked(cls, prefix).items()}


FLAT_COLUMNS: dict[str, str] = _columns(CoreRecord)
"""Column of the report's flat table -> dotted path in the record, from the :class:`CoreRecord` fields marked
:func:`suite.records.fields.column` (:func:`flat_columns` adds the installed strategies' own)."""


def _strategy_columns() -> dict[str, tuple[str, dataclasses.Field[Any]]]:
    """The installed strategies' record parts' columns (at ``strategy_part.<field>``), with their fields."""
    columns: dict[str, tuple[str, dataclasses.Field[Any]]] = {}
    taken = dict(FLAT_COLUMNS)
    for entry in STRATEGIES:
        part = strategy_part_type(entry.name)
        for name, (path, f) in (_marked(part, "strategy_part.") if part is not None else {}).items():
            if taken.setdefault(name, path) != path:
                raise PluginError(f"strategy {entry.name!r}: column {name!r} of its record part is already {taken[name]!r}")
            columns[name] = (path, f)
    return columns


def flat_columns() -> dict[str, str]:
    """The report's flat table's columns: :data:`FLAT_COLUMNS`, then those the installed strategies' record parts mark
    (at ``strategy_part.<field>``); :class:`PluginError` naming the strategy whose column another one already is."""
    return FLAT_COLUMNS | {name: path for name, (path, _) in _strategy_columns().items()}


def joined_columns(table: str) -> list[str]:
    """The installed strategies' columns that join the report's ``table`` (one of
    :data:`suite.records.fields.REPORT_TABLES`), in the order of :func:`flat_columns`: those whose :func:`column` mark names
    it. The table shows them after its own columns, so that a strategy's field reaches it from its package alone."""
    return [name for name, (_, f) in _strategy_columns().items() if table in f.metadata.get("tables", ())]


def column_texts() -> dict[str, Callable[[Any], Any]]:
    """Column of the flat table -> how it shows its values, for the columns whose :func:`column` mark says (a grid as
    ``2x3``, a strategy's list of classes as ``0,3,7``)."""
    marked = _marked(CoreRecord) | _strategy_columns()
    return {name: f.metadata["text"] for name, (_, f) in marked.items() if "text" in f.metadata}
