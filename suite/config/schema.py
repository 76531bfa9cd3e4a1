"""Plain data (parsed YAML or JSON) checked against dataclasses: the one converter of the suite.

Scenario files (:mod:`suite.config.scenario`) and run records (:mod:`suite.records.record`) are read through
it. Every mapping must hold only the dataclass's fields and every value the field's type; an
error names the field's path (``train.epoch: unknown field``, ``telemetry.step_p50: expected a
number``). Types understood: ``bool``, ``int``, ``float`` (integers accepted), ``str``, ``dict``
and ``dict[str, X]``, ``list[X]``, ``X | None``, ``Literal[...]``, ``Annotated[str, registry]``
(one of the registry's names, see :mod:`suite.config.registry`), nested dataclasses and ``Any``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from .registry import Registry


class SchemaError(ValueError):
    """Data does not fit its schema; the message starts with the field's path."""


T = TypeVar("T")


def _choices(tp: Any) -> tuple[Any, ...] | None:
    """The values a ``Literal`` or a registry-backed ``Annotated`` type allows (None for other types)."""
    if get_origin(tp) is Literal:
        return get_args(tp)
    if get_origin(tp) is Annotated:
        registry = next((m for m in tp.__metadata__ if isinstance(m, Registry)), None)
        return registry.names() if registry is not None else None
    return None


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType) and type(None) in get_args(tp)


def _strip_optional(tp: Any) -> Any:
    args = [a for a in get_args(tp) if a is not type(None)]
    return args[0] if len(args) == 1 else typing.Union[tuple(args)]


def type_name(tp: Any) -> str:
    """How an error message names what a field of type ``tp`` expects."""
    choices = _choices(tp)
    if choices is not None:
        return "one of " + ", ".join(repr(a) for a in choices)
    if _is_optional(tp):
        return type_name(_strip_optional(tp)) + " or null"
    if get_origin(tp) is list:
        return f"a list of {type_name(get_args(tp)[0])}"
    if get_origin(tp) is dict:
        return "a mapping"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a mapping"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


_SCALARS: dict[Any, Any] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    dict: lambda v: isinstance(v, dict),
}
"""The plain types a field may have, and what a value must be to be one."""


def convert(tp: Any, value: Any, path: str, error: type[SchemaError] = SchemaError, partial: bool = False) -> Any:
    """``value`` as type ``tp`` (nested dataclasses built; with ``partial``, checked and left as mappings)."""
    if tp is Any:
        return value
    if _is_optional(tp):
        return None if value is None else convert(_strip_optional(tp), value, path, error, partial)
    origin = get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise error(f"{path}: expected a mapping of {', '.join(f.name for f in dataclasses.fields(tp))}")
        return check(tp, value, path, error) if partial else build(tp, value, path, error)
    choices = _choices(tp)
    if choices is not None:
        if value not in choices:
            raise error(f"{path}: {value!r} is not {type_name(tp)}")
        return value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise error(f"{path}: expected {type_name(tp)}, got {value!r}")
        (item,) = get_args(tp)
        return [convert(item, v, f"{path}[{i}]", error, partial) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise error(f"{path}: expected {type_name(tp)}, got {value!r}")
        _, item = get_args(tp)
        return {k: convert(item, v, f"{path}.{k}", error, partial) for k, v in value.items()}
    if tp in _SCALARS:
        if not _SCALARS[tp](value):
            hint = " (YAML reads a number such as 1e-4 as text: write 1.0e-4 or 0.0001)" if _number_text(tp, value) else ""
            raise error(f"{path}: expected {type_name(tp)}, got {value!r}{hint}")
        return float(value) if tp is float else value
    raise TypeError(f"unsupported field type {tp} at {path}")  # a bug in the schema, not in the input


_EXPONENT_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def _number_text(tp: Any, value: Any) -> bool:
    """Whether ``value`` is a number that YAML read as a string (``1e-4``: YAML 1.1 floats need a dot)."""
    return tp is float and isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()) is not None


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """The field types of dataclass ``cls``, ``Annotated`` kept; evaluated once per class (it costs milliseconds)."""
    return typing.get_type_hints(cls, include_extras=True)


def _values(cls: type, data: dict[str, Any], path: str, error: type[SchemaError], partial: bool) -> dict[str, Any]:
    hints = type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    prefix = f"{path}." if path else ""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise error(f"{prefix}{unknown[0]}: unknown field; expected one of {', '.join(fields)}")
    values = {}
    for name, f in fields.items():
        if name in data:
            values[name] = convert(hints[name], data[name], f"{prefix}{name}", error, partial)
        elif not partial and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise error(f"{prefix}{name}: required field is missing")
    return values


def build(cls: type[T], data: dict[str, Any], path: str, error: type[SchemaError] = SchemaError) -> T:
    """An instance of dataclass ``cls`` from ``data``; raises ``error`` naming the first field that does not fit."""
    return cls(**_values(cls, data, path, error, partial=False))


def check(cls: type, data: dict[str, Any], path: str, error: type[SchemaError] = SchemaError) -> dict[str, Any]:
    """``data`` checked against dataclass ``cls`` where fields may be missing (a partial record); returns it converted."""
    return _values(cls, data, path, error, partial=True)
