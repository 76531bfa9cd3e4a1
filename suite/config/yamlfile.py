"""YAML in: the one reader of the suite's YAML files (scenarios, the gate's workload) and ``--set`` values.

PyYAML's safe loader with two changes, so that a file means what it says:

- numbers as YAML 1.2 reads them: ``1e-3`` is a float (YAML 1.1 needs a dot, ``1.0e-3``, and reads ``1e-3`` as text);
- a key given twice in one mapping is an error naming the key and both lines (YAML 1.1 keeps the last one silently).

Every problem is a :class:`YamlError` of one line naming the file: a file that is not UTF-8 text, or not YAML.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml


class YamlError(ValueError):
    """A YAML file or value cannot be read; the message is one line naming the file (or the value)."""


_FLOAT_1_2 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
"""PyYAML's float pattern with the exponent form of YAML 1.2 added (``1e-3``, ``2E5``: digits, no dot)."""


class _Loader(yaml.SafeLoader):
    """The safe loader, reading YAML 1.2 floats and refusing duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given at line {first})", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789."))
for _first in "-+0123456789.":  # the float pattern before the int one, as PyYAML orders them
    _resolvers = _Loader.yaml_implicit_resolvers[_first]
    _resolvers.insert(0, _resolvers.pop())


def _one_line(error: yaml.YAMLError) -> str:
    """A PyYAML error as one line: where, then what."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return " ".join(str(error).split())


def parse_yaml(text: str, source: str) -> Any:
    """The data of YAML ``text``; :class:`YamlError` naming ``source`` where it is not YAML."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (the safe loader's subclass)
    except yaml.YAMLError as error:
        raise YamlError(f"{source}: not valid YAML: {_one_line(error)}") from None


def load_yaml(path: str | Path) -> Any:
    """The data of YAML file ``path``; :class:`YamlError` naming the file where it is not UTF-8 text or not YAML."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise YamlError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlError(
            f"{path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); a YAML file is expected"
        ) from None
    return parse_yaml(text, str(path))
