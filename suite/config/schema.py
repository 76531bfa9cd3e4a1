"""Plain data (parsed YAML or JSON) checked against dataclasses, on pydantic v2.

**Scenarios and runs** (:func:`build`, :func:`located_problems`): a dataclass is validated under one configuration
(:data:`CONFIG`: strict types, finite floats, no unknown field) with the bounds each field carries
(``Annotated[int, Field(ge=1), AtMost(10_000, "why")]``); every problem is found in one pass, each one line naming its
field's path (``train.lr: must be a finite number, got nan``). A registry's name is ``Annotated[str, OneOf(REGISTRY)]``,
checked against the names registered when it is read. :func:`json_schema` gives the same definitions as a JSON Schema.

**Records** (:func:`check`, :func:`convert`): a run record may lack any field (a failed run has few), so records keep
the partial checker below, the suite's first: it checks the fields a record has and stops at the first that does not
fit. Nothing else uses it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import operator
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError, SchemaValidator, core_schema

from .names import did_you_mean
from .registry import Registry
from .shown import listed, shown, shown_name


class SchemaError(ValueError):
    """Data does not fit its schema; the message starts with the field's path (several: joined by ``; ``)."""


T = TypeVar("T")

CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True)
"""How every dataclass is read: unknown fields refused, no type coercion, finite floats only, field docs kept."""


# --- field annotations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OneOf:
    """``Annotated[str, OneOf(STRATEGIES)]``: one of the registry's names, read when a value is checked (plugins
    registered later count), and the JSON Schema's ``enum`` when it is generated."""

    registry: Registry

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Any) -> dict[str, Any]:
        return {**handler(schema), "enum": list(self.registry.names())}

    def _check(self, value: str) -> str:
        names = self.registry.names()
        if value not in names:
            hint = did_you_mean(value, names)
            raise PydanticCustomError(
                "registry_name", "{text}", {"text": f"{shown(value)} is not one of {', '.join(map(shown, names))}{hint}"}
            )
        return value


@dataclass(frozen=True)
class AtMost:
    """``Annotated[int, AtMost(4096, "the generator's first layer ...")]``: an upper bound with its reason, which the
    error gives (sizes that cannot fit in memory, counts that would never finish)."""

    limit: float
    reason: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Any) -> dict[str, Any]:
        return {**handler(schema), "maximum": self.limit}

    def _check(self, value: Any) -> Any:
        if value > self.limit:
            text = f"{_broken_bound('le', self.limit, value)}: {self.reason}"
            raise PydanticCustomError("at_most", "{text}", {"text": text})
        return value


# --- validation -----------------------------------------------------------------------------------------


def _relax_dataclasses(node: Any) -> None:
    """Let a strict dataclass schema take a mapping (pydantic's strict mode wants an instance); its fields stay strict."""
    if isinstance(node, dict):
        if node.get("type") == "dataclass":
            node["strict"] = False
        for value in node.values():
            _relax_dataclasses(value)
    elif isinstance(node, list):
        for value in node:
            _relax_dataclasses(value)


@functools.cache
def _adapter(tp: Any) -> TypeAdapter:
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if "__pydantic_config__" not in vars(tp):
            tp.__pydantic_config__ = CONFIG  # type: ignore[attr-defined]
        return TypeAdapter(tp)
    return TypeAdapter(tp, config=CONFIG)


@functools.cache
def _validator(tp: Any) -> SchemaValidator:
    schema = copy.deepcopy(_adapter(tp).core_schema)
    _relax_dataclasses(schema)
    return SchemaValidator(schema, CONFIG)  # type: ignore[arg-type]


def json_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of dataclass ``cls`` (editors validate files with it; the docs' reference is made from it).

    pydantic leaves out the defaults that a ``default_factory`` makes; those that are plain values (``betas``'
    ``[0.5, 0.999]``) are added, a section's (its fields' defaults) is not.
    """
    schema = _adapter(cls).json_schema()
    for section in _dataclasses_in(cls):
        node = schema if section is cls else schema.get("$defs", {}).get(section.__name__)
        if node is None:
            continue
        for f in dataclasses.fields(section):
            if f.init and f.default_factory is not dataclasses.MISSING and f.name in node.get("properties", {}):
                value = f.default_factory()
                if not dataclasses.is_dataclass(value):
                    node["properties"][f.name]["default"] = value
    return schema


def _dataclasses_in(cls: type) -> list[type]:
    """``cls`` and every dataclass its fields hold, at any depth."""
    found: list[type] = []

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if tp in found:
                return
            found.append(tp)
            for hint in type_hints(tp).values():
                visit(hint)
        for arg in get_args(tp):
            visit(arg)

    visit(cls)
    return found


Located = tuple[tuple[Any, ...], str]
"""A problem and where it lies: the field names and list indices from the data's top (``("runs", 0, "strategy")``),
and its line (``runs[0].strategy: ...``)."""


def _located(tp: Any, data: Any, path: str) -> tuple[Any, list[Located]]:
    """``(value, [])`` where ``data`` fits ``tp``, else ``(None, every problem with its location)``."""
    try:
        return _validator(tp).validate_python(data), []
    except ValidationError as error:
        errors = _one_branch(tp, error.errors(include_url=False))
        return None, [(tuple(err["loc"]), _problem(tp, err, path)) for err in errors]


def _member(tp: Any) -> Any:
    """A union's one dataclass member (the one that has fields), else ``tp`` itself."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        classes = [m for m in get_args(tp) if isinstance(m, type) and dataclasses.is_dataclass(m)]
        return classes[0] if len(classes) == 1 else tp
    return tp


_MISMATCH = {"list_type", "dict_type", "dataclass_type", "dataclass_exact_type", "model_type", "int_type", "float_type"}
"""Pydantic's error kinds that say a value is not of a union member's kind at all."""


def _one_branch(tp: Any, errors: list[Any]) -> list[Any]:
    """The errors of a union's member the value was meant for, without pydantic's tag in their location.

    A value checked against ``list[int] | SeedPolicy`` fails both members: a mapping with a bad field is "not a list"
    for one and "step: must be at least 1" for the other. Where one member's errors lie inside the value, the other
    members' "not of my kind" errors are dropped; the member's tag (its name) leaves the location either way.
    """
    branches = []
    for err in errors:
        loc, at, union = list(err["loc"]), tp, None
        for i, part in enumerate(loc):
            at = strip_type(at)
            if get_origin(at) in (typing.Union, types.UnionType) and isinstance(part, str):
                union = (tuple(loc[:i]), part, len(loc) - i - 1)  # the union's place, the member, depth inside it
                members = [m for m in get_args(at) if getattr(m, "__name__", None) == part]
                at = members[0] if members else Any
                del loc[i]
                break
            at = _type_at(at, (part,))
        branches.append((dict(err, loc=tuple(loc)), union))
    meant = {u[0] for err, u in branches if u is not None and (u[2] > 0 or err["type"] not in _MISMATCH)}
    return [err for err, u in branches if not (u is not None and u[0] in meant and u[2] == 0 and err["type"] in _MISMATCH)]


def _fitted(tp: Any, data: Any, path: str, error: type[SchemaError]) -> Any:
    """``data`` as type ``tp``; raises ``error`` naming every field that does not fit."""
    value, found = _located(tp, data, path)
    if found:
        raise error(listed(text for _, text in found))
    return value


def located_problems(cls: type, data: Any, path: str = "") -> list[Located]:
    """Every way ``data`` does not fit dataclass ``cls``, one line each naming the field, with its location in ``data``
    (:data:`Located`; empty: it fits)."""
    return _located(cls, data, path)[1]


def build(cls: type[T], data: dict[str, Any], path: str, error: type[SchemaError] = SchemaError) -> T:
    """An instance of dataclass ``cls`` from ``data``; raises ``error`` naming every field that does not fit."""
    return typing.cast(T, _fitted(cls, data, path, error))


def convert_field(cls: type, name: str, value: Any, path: str, error: type[SchemaError] = SchemaError) -> Any:
    """``value`` checked as field ``name`` of dataclass ``cls`` (its type and bounds); raises ``error`` naming ``path``."""
    return _fitted(type_hints(cls)[name], value, path, error)


# --- one line per problem -------------------------------------------------------------------------------


def strip_type(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and ``| None``."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def section_type(tp: Any) -> type | None:
    """The dataclass a field of type ``tp`` holds (``X`` or ``X | None``), or None for any other field."""
    inner = strip_type(tp)
    return inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None


def _type_at(tp: Any, loc: tuple[Any, ...]) -> Any:
    """The type at ``loc`` (pydantic's error location) inside ``tp``; Any where it cannot be told. In a union of a
    dataclass and other types, a field name goes into the dataclass."""
    for part in loc:
        tp = _member(strip_type(tp))
        if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(part, str):
            tp = type_hints(tp).get(part, Any)
        elif get_origin(tp) is list and isinstance(part, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict and get_args(tp):
            tp = get_args(tp)[1]
        else:
            return Any
    return tp


def _path(path: str, loc: tuple[Any, ...]) -> str:
    text = path
    for part in loc:
        name = shown_name(part)
        text += f"[{part}]" if isinstance(part, int) else (f".{name}" if text else name)
    return text


def _number(value: Any) -> str:
    """A bound or a value as a reader writes it: ``10000``, ``0.0001``, ``1e+12``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value)) if abs(value) >= 1e4 else repr(value)
    return shown(value)


_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "none_required": "null",
}


_BOUNDS = {"greater_than_equal": "ge", "greater_than": "gt", "less_than_equal": "le", "less_than": "lt"}
"""pydantic's errors of a broken bound, each with the name of its bound."""


def _broken_bound(name: str, bound: Any, value: Any) -> str:
    """``value`` breaks bound ``name`` (ge, gt, le or lt) of ``bound``, worded once for pydantic's errors and records'."""
    zero = {"ge": "not be negative", "gt": "be positive"}
    said = {"ge": "be at least", "gt": "be greater than", "le": "be at most", "lt": "be less than"}[name]
    return f"must {zero[name] if bound == 0 and name in zero else f'{said} {_number(bound)}'}, got {_number(value)}"


def _problem(tp: Any, err: Any, path: str) -> str:
    """One pydantic error as ``field.path: what is wrong, got what``."""
    loc, kind, ctx, value = tuple(err["loc"]), err["type"], err.get("ctx") or {}, err.get("input")
    where = _path(path, loc)
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        parent = _member(strip_type(_type_at(tp, loc[:-1])))
        names = [f.name for f in dataclasses.fields(parent) if f.init] if dataclasses.is_dataclass(parent) else []
        return f"{where}: unknown field; expected one of {', '.join(names)}{did_you_mean(loc[-1], names)}"
    if kind in ("missing", "missing_argument"):
        return f"{where}: required field is missing"
    if kind == "literal_error":
        choices = get_args(strip_type(_type_at(tp, loc)))
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        return f"{where}: {shown(value)} is not one of {', '.join(map(shown, choices)) if choices else ctx.get('expected')}{hint}"
    if kind in ("dataclass_type", "dataclass_args_type"):
        cls = strip_type(_type_at(tp, loc))
        fields = ", ".join(f.name for f in dataclasses.fields(cls) if f.init) if dataclasses.is_dataclass(cls) else "its fields"
        return f"{where}: expected a mapping of {fields}, got {shown(value)}"
    if kind in _EXPECTED:
        return f"{where}: expected {_EXPECTED[kind]}, got {shown(value)}"
    if kind == "finite_number":
        return f"{where}: must be a finite number, got {shown(value)}"
    if kind in _BOUNDS:
        return f"{where}: {_broken_bound(_BOUNDS[kind], ctx[_BOUNDS[kind]], value)}"
    if kind in ("too_short", "too_long"):
        return f"{where}: expected {ctx.get('min_length', ctx.get('max_length'))} items, got {shown(value)}"
    message = str(err["msg"])
    return f"{where}: {message[:1].lower()}{message[1:]}"


# --- the partial checker of records ---------------------------------------------------------------------


def _choices(tp: Any) -> tuple[Any, ...] | None:
    """The values a ``Literal`` or a registry-backed ``Annotated`` type allows (None for other types)."""
    if get_origin(tp) is Literal:
        return get_args(tp)
    if get_origin(tp) is Annotated:
        one_of = next((m for m in tp.__metadata__ if isinstance(m, OneOf)), None)
        return one_of.registry.names() if one_of is not None else None
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
    if get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if get_origin(tp) is Annotated:
        return type_name(get_args(tp)[0])
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
"""The plain types a record field may have, and what a value must be to be one."""


def convert(tp: Any, value: Any, path: str, error: type[SchemaError] = SchemaError) -> Any:
    """``value`` as type ``tp`` for a record, checked (nested dataclasses checked and left as mappings: :func:`check`)."""
    if tp is Any:
        return value
    if _is_optional(tp):
        return None if value is None else convert(_strip_optional(tp), value, path, error)
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(tp, value, path, error)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise error(f"{path}: expected a mapping of {', '.join(f.name for f in dataclasses.fields(tp))}")
        return check(tp, value, path, error)
    choices = _choices(tp)
    if choices is not None:
        if value not in choices:
            raise error(f"{path}: {shown(value)} is not {type_name(tp)}")
        return value
    if origin is Annotated:
        return _convert_bounded(tp, value, path, error)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise error(f"{path}: expected {type_name(tp)}, got {shown(value)}")
        (item,) = get_args(tp)
        return [convert(item, v, f"{path}[{i}]", error) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise error(f"{path}: expected {type_name(tp)}, got {shown(value)}")
        _, item = get_args(tp)
        return {k: convert(item, v, f"{path}.{shown_name(k)}", error) for k, v in value.items()}
    if tp in _SCALARS:
        if not _SCALARS[tp](value):
            raise error(f"{path}: expected {type_name(tp)}, got {shown(value)}")
        return float(value) if tp is float else value
    raise TypeError(f"unsupported field type {tp} at {path}")  # a bug in the schema, not in the input


def _bounds_problem(tp: Any, value: Any) -> str | None:
    """Why ``value`` breaks a bound of ``Annotated`` type ``tp`` (``Field(ge=1)``, :class:`AtMost`), as :func:`_problem`
    words it; None where it keeps them (or is no number)."""
    if isinstance(value, list):  # a list's length: Field(min_length=2, max_length=2)
        for mark in tp.__metadata__:
            for bound in getattr(mark, "metadata", ()):
                least, most = getattr(bound, "min_length", None), getattr(bound, "max_length", None)
                if (least is not None and len(value) < least) or (most is not None and len(value) > most):
                    return f"expected {least if least is not None else most} items, got {shown(value)}"
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    for mark in tp.__metadata__:
        if isinstance(mark, AtMost) and value > mark.limit:
            return f"{_broken_bound('le', mark.limit, value)}: {mark.reason}"
        for bound in getattr(mark, "metadata", ()):  # a pydantic Field's annotated_types bounds
            for name, keeps in (("ge", operator.ge), ("gt", operator.gt), ("le", operator.le)):
                if (limit := getattr(bound, name, None)) is not None and not keeps(value, limit):
                    return _broken_bound(name, limit, value)
    return None


def _convert_bounded(tp: Any, value: Any, path: str, error: type[SchemaError]) -> Any:
    """``value`` as ``Annotated`` type ``tp``: its base type, then its bounds (:func:`_bounds_problem`)."""
    converted = convert(get_args(tp)[0], value, path, error)
    if (problem := _bounds_problem(tp, converted)) is not None:
        raise error(f"{path}: {problem}")
    return converted


def _convert_union(tp: Any, value: Any, path: str, error: type[SchemaError]) -> Any:
    """``value`` as the first of ``tp``'s alternatives it fits (one of several shapes: a list of points, or a list per
    class GAN); ``error`` naming them all where it fits none."""
    for alternative in get_args(tp):
        try:
            return convert(alternative, value, path, error)
        except SchemaError:
            continue
    raise error(f"{path}: expected {type_name(tp)}, got {shown(value)}")


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """The field types of dataclass ``cls``, ``Annotated`` kept; evaluated once per class (it costs milliseconds)."""
    return typing.get_type_hints(cls, include_extras=True)


def check(cls: type, data: dict[str, Any], path: str, error: type[SchemaError] = SchemaError) -> dict[str, Any]:
    """``data`` checked against dataclass ``cls`` where fields may be missing (a partial record); returns it converted.

    A class that says ``OPEN = True`` (a part whose keys grow with the suite, a rank's telemetry) has the fields it
    declares checked and keys it does not declare passed over; any other refuses an unknown key. A field without a
    default must be there."""
    hints = type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    prefix = f"{path}." if path else ""
    unknown = sorted(set(data) - set(names), key=str)
    if unknown and not getattr(cls, "OPEN", False):
        raise error(f"{prefix}{unknown[0]}: unknown field; expected one of {', '.join(names)}")
    required = [f.name for f in dataclasses.fields(cls) if f.default is f.default_factory is dataclasses.MISSING]
    if missing := [name for name in required if name not in data]:  # a field without a default: every writer sets it
        raise error(f"{prefix}{missing[0]}: required field is missing")
    return {name: convert(hints[name], data[name], f"{prefix}{name}", error) for name in names if name in data}
