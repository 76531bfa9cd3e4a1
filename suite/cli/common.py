"""What every sub-command shares: the command's logger, the bad-input error, ``--set`` overrides and the options
dataclasses built from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger("suite")


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


TIMESTAMPED_FORMAT = "%(asctime)s %(message)s"
"""The log lines of a command that runs runs (``suite run``): each begins with its local time."""


def parse_overrides(texts: list[str] | None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` options as ``{field: value}``, each value read as YAML 1.2 (``1e-3`` a number, ``[0.5, 0.9]``
    a list, ``null``); :class:`UsageError` naming the option for one that names no scenario field or is given twice.

    The values are checked later by the scenario's own schema, with the file's other fields.
    """
    from ..config.expansion import override_problem
    from ..config.yamlfile import YamlError, parse_yaml

    overrides: dict[str, Any] = {}
    for text in texts or []:
        key, equals, value = text.partition("=")
        key = key.strip()
        if not equals or not key:
            raise UsageError(f"--set {text}: expected FIELD=VALUE, e.g. --set train.lr=1e-3")
        if (problem := override_problem(key)) is not None:
            raise UsageError(f"--set {problem}")
        if key in overrides:
            raise UsageError(f"--set {key}: given twice")
        try:
            overrides[key] = parse_yaml(value, f"--set {key}")
        except YamlError as error:
            raise UsageError(str(error)) from None
    return overrides


Options = TypeVar("Options", bound="DataclassInstance")


def options_from(cls: type[Options], args: argparse.Namespace, **given: Any) -> Options:
    """Options dataclass ``cls`` from the command line, built once: each field from the option of its name
    (``--ranks-per-node`` for ``ranks_per_node``), ``given`` (values the command converts) over them; a field that no
    option names keeps its default."""
    named = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.init and hasattr(args, f.name)}
    return cls(**{**named, **given})
