"""YAML in: the one reader of the suite's YAML files (scenarios, the gate's workload) and ``--set`` values.

PyYAML's safe loader, with numbers as YAML 1.2 reads them (``1e-3`` is a float) and a key given twice in one mapping
an error naming the key and both lines. Parsing is bounded so that a small hostile file cannot take the machine:
nesting (:data:`MAX_YAML_DEPTH`), what aliases add (:data:`MAX_ALIAS_NODES` nodes, :data:`MAX_ALIAS_CHARS` or the
caller's size cap in characters), no alias inside itself, and the file's size (:class:`YamlTooLarge`), all checked on
the composed node graph before any value is built (docs/scenarios.md gives the limits). Every problem is a
:class:`YamlError` of one line naming the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .shown import shown


class YamlError(ValueError):
    """A YAML file or value cannot be read; the message is one line naming the file (or the value)."""


class YamlTooLarge(YamlError):
    """A YAML file larger than its reader's limit (``size``: at least this many bytes; ``limit``)."""

    def __init__(self, message: str, size: int, limit: int):
        super().__init__(message)
        self.size, self.limit = size, limit


MAX_YAML_DEPTH = 50
"""Collections (mappings, lists) nested deeper than this, aliases followed, are refused."""

MAX_ALIAS_NODES = 100_000
"""Aliases may add at most this many nodes to the document as written (every use of an alias counts its whole
node); a scenario that repeats a block of settings with anchors adds hundreds."""

MAX_ALIAS_CHARS = 1 << 20
"""Aliases may add at most this many characters of text (scalars' characters, one per node) to the document as
written, unless the reader's size cap is larger (:func:`load_yaml`'s ``max_bytes``): a repeated long string counts
its length every time."""


_FLOAT_1_2 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
"""PyYAML's float pattern with the exponent form of YAML 1.2 added (``1e-3``, ``2E5``: digits, no dot)."""


class _TooDeep(yaml.composer.ComposerError):
    """Collections nested deeper than :data:`MAX_YAML_DEPTH` (found while composing)."""


class _Loader(yaml.SafeLoader):
    """The safe loader, reading YAML 1.2 floats, refusing duplicate keys and collections nested too deep."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # bounded here, while composing: the composer recurses once per level (Python's stack would overflow first)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _TooDeep(None, None, f"nested more than {MAX_YAML_DEPTH} deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`, merged by the base class
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {shown(key)} (first given at line {first})", key_node.start_mark
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


def _alias_problem(root: yaml.Node, max_chars: int = MAX_ALIAS_CHARS) -> str | None:
    """Why the node graph under ``root`` is too large or too deep once its aliases are followed, or None.

    An alias is the very node its anchor marks, so the document as written is a graph; its size (nodes, and
    characters: a scalar's text and one per node) and depth with every alias expanded are counted once per node
    (iteratively: nothing here recurses). Aliases may add :data:`MAX_ALIAS_NODES` nodes and ``max_chars`` characters.
    """
    size: dict[int, int] = {}  # node -> nodes under it, itself included, aliases expanded
    chars: dict[int, int] = {}  # node -> characters under it, aliases expanded
    depth: dict[int, int] = {}  # node -> collections on the deepest path down from it, itself included
    distinct = written = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            chars[key] = 1 + (len(str(node.value)) if isinstance(node, yaml.ScalarNode) else sum(chars[id(c)] for c in children))
            depth[key] = (0 if isinstance(node, yaml.ScalarNode) else 1) + max((depth[id(c)] for c in children), default=0)
            if depth[key] > MAX_YAML_DEPTH:
                return f"nested more than {MAX_YAML_DEPTH} deep once its aliases are followed"
            if size[key] - distinct > MAX_ALIAS_NODES:  # nodes beyond those written: what the aliases add
                return f"its aliases expand to more than {MAX_ALIAS_NODES:,} nodes beyond the ones written"
            if chars[key] - written > max_chars:  # characters beyond those written
                return f"its aliases expand to more than {max_chars:,} characters beyond the ones written"
            continue
        if key in size:
            continue
        if key in on_path:
            line = node.start_mark.line + 1
            return f"line {line}: an alias refers to a node that contains it (a recursive structure)"
        on_path.add(key)
        distinct += 1
        written += 1 + (len(str(node.value)) if isinstance(node, yaml.ScalarNode) else 0)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    return None


def parse_yaml(text: str, source: str, max_alias_chars: int = MAX_ALIAS_CHARS) -> Any:
    """The data of YAML ``text``; :class:`YamlError` naming ``source`` where it is not YAML or is too large or
    too deep once its aliases are followed (:data:`MAX_YAML_DEPTH`, :data:`MAX_ALIAS_NODES`, ``max_alias_chars``)."""
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses characters YAML does not allow (NUL) at once
        node = loader.get_single_node()
        problem = _alias_problem(node, max_alias_chars) if node is not None else None
        data = loader.construct_document(node) if node is not None and problem is None else None
    except ValueError as error:  # a value PyYAML cannot build: a timestamp of month 13, an integer of 5,000 digits
        raise YamlError(f"{source}: not valid YAML: {' '.join(str(error).split())[:160]}") from None
    except yaml.YAMLError as error:
        what = "refused" if isinstance(error, _TooDeep) else "not valid YAML"
        raise YamlError(f"{source}: {what}: {_one_line(error)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if problem is not None:
        raise YamlError(f"{source}: refused: {problem}")
    return data


def load_yaml(path: str | Path, max_bytes: int | None = None) -> Any:
    """The data of YAML file ``path``; :class:`YamlError` naming the file where it is not UTF-8 text or not YAML,
    :class:`YamlTooLarge` where it holds more than ``max_bytes`` (None: no limit)."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            raw = file.read() if max_bytes is None else file.read(max_bytes + 1)
    except OSError as error:
        raise YamlError(f"{path}: cannot be read ({error.strerror})") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise YamlTooLarge(f"{path}: larger than {max_bytes:,} bytes", len(raw), max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlError(
            f"{path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); a YAML file is expected"
        ) from None
    return parse_yaml(text, str(path), max(MAX_ALIAS_CHARS, max_bytes or 0))
