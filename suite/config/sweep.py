"""Sweeps of a run entry: ``sweep: {train.lr: [0.0001, 0.001], wgan_gp.n_critic: [5, 1]}`` tries every combination.

A sweep names fields of the sections a run entry may override (:func:`entry_sections`) by their dotted path, each with
a list of values; the entry stands for one run per combination (the first-listed values first), each as if the entry
had given those values itself (:func:`with_point`). Each value is converted like the field itself, errors naming it
(``runs[3].sweep.train.lr[1]: ...``); each run records its values and its combination's position, which
:mod:`suite.analysis.tuning` ranks (docs/tuning.md).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from .scenario import RunSpec, ScenarioError, entry_own, entry_sections, section_class, with_own
from .schema import convert_field, type_hints
from .shown import shown, shown_name

NOT_SWEPT = {
    "train.seed": "seeds are an axis of their own: give train.seeds, and every setting runs on every seed",
    "train.seeds": "seeds are an axis of their own: give train.seeds, and every setting runs on every seed",
    "train.checkpoint_every": "how often a run saves is not a training setting",
    "train.stop_at_target": "when a run stops is not a setting to tune; give it under the entry's train",
}
"""Fields of the entry sections that a sweep may not vary, and why."""


@dataclass(frozen=True)
class SweepPoint:
    """One combination of a sweep's values."""

    values: dict[str, Any]
    """Dotted field -> value, in the sweep's order (empty: the entry has no sweep)."""
    indices: dict[str, int]
    """Dotted field -> the value's position in its list (for error messages)."""
    order: int
    """Position of the combination in the sweep (0: every field at its first-listed value)."""


def _fail(path: str, message: str) -> ScenarioError:
    return ScenarioError(f"{path}: {message}")


def sweep_points(spec: RunSpec, path: str) -> list[SweepPoint]:
    """The combinations of ``spec``'s sweep (one empty point without one); :class:`ScenarioError` naming a bad field.

    ``path`` is the entry's (``runs[3]``); errors name ``runs[3].sweep.train.lr[1]``.
    """
    if spec.sweep is None:
        return [SweepPoint({}, {}, 0)]
    if not spec.sweep:
        raise _fail(f"{path}.sweep", "is empty: name the fields to try and their values, e.g. {train.lr: [0.0001, 0.001]}")
    fields: dict[str, list[Any]] = {}
    for key, values in spec.sweep.items():
        where = f"{path}.sweep.{shown_name(key)}"
        section, _, name = str(key).partition(".")
        sections = entry_sections()
        if section not in sections or not name:
            raise _fail(where, f"not sweepable: a sweep varies fields of {', '.join(sections)} (e.g. train.lr)")
        types = type_hints(section_class(section))
        if name not in types:
            raise _fail(where, f"unknown field; {section} has {', '.join(types)}")
        if key in NOT_SWEPT:
            raise _fail(where, f"not sweepable: {NOT_SWEPT[key]}")
        if name in (entry_own(spec, section) or {}):
            raise _fail(where, f"also set in {path}.{section}; give it in one place")
        if not isinstance(values, list):
            raise _fail(where, f"expected a list of values to try, got {shown(values)}")
        if not values:
            raise _fail(where, "is empty: give the values to try")
        converted = [convert_field(section_class(section), name, v, f"{where}[{k}]", ScenarioError) for k, v in enumerate(values)]
        repeated = [v for k, v in enumerate(converted) if v in converted[:k]]
        if repeated:
            raise _fail(where, f"values repeat: {shown(repeated)}")
        fields[key] = converted
    combinations = itertools.product(*(list(enumerate(v)) for v in fields.values()))
    return [
        SweepPoint({key: v for key, (_, v) in zip(fields, combo)}, {key: k for key, (k, _) in zip(fields, combo)}, order)
        for order, combo in enumerate(combinations)
    ]


def with_point(spec: RunSpec, point: SweepPoint) -> RunSpec:
    """``spec`` as it reads with ``point``'s values given in its own sections (and no sweep)."""
    if spec.sweep is None:
        return spec
    merged = {name: {**(entry_own(spec, name) or {}), **fields} for name, fields in overrides_of(point.values).items()}
    return with_own(spec, merged)


def overrides_of(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Swept values as a run entry's section overrides: ``{"train.lr": 0.001}`` -> ``{"train": {"lr": 0.001}}``."""
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        section, _, name = key.partition(".")
        sections.setdefault(section, {})[name] = value
    return sections


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each dotted field by its last part, unless two share it (then by the whole path)."""
    last = [key.rpartition(".")[2] for key in keys]
    return {key: name if last.count(name) == 1 else key for key, name in zip(keys, last)}


def _value_text(value: Any, join: str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return join.join(_value_text(v, join) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def sweep_id(values: dict[str, Any]) -> str:
    """The part of a run id naming its swept values: ``lr0.001-n_critic5`` ('' without a sweep)."""
    names = _short_names(list(values))
    return "-".join(f"{names[key]}{_value_text(v, '_')}" for key, v in values.items())


def sweep_text(values: dict[str, Any] | None) -> str:
    """Swept values for a table: ``lr=0.001, n_critic=5`` ('' without a sweep)."""
    if not values:
        return ""
    names = _short_names(list(values))
    return ", ".join(f"{names[key]}={_value_text(v, ',')}" for key, v in values.items())
