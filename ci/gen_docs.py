"""Generate the reference pages of the documentation site from the code (`make docs` runs it).

- ``docs/reference/scenario.md``: one table per scenario section (field, type, default, doc), read
  from ``suite/config/scenario.py``: the dataclasses and their type hints and defaults by import, the
  one docstring line under each field with ``ast`` (Python keeps no attribute docstrings at run
  time). A field's doc exists once, in the code.
- ``docs/reference/cli.md``: every sub-command's usage and help, from ``suite.cli.build_parser()``.

Both are written deterministically (same code, same bytes) and are not committed (``.gitignore``).
Usage: ``python ci/gen_docs.py [OUT_DIR]`` (default ``docs/reference``); ``--check`` only lists
the fields without a doc and exits 1 if there are any.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from suite.config import scenario as scenario_module  # noqa: E402
from suite.config.registry import Registry  # noqa: E402

# Dataclasses of suite/config/scenario.py that are not part of a scenario file, and why.
NOT_SCENARIO_FIELDS = {"Run": "one expanded run as written to run.json by suite run; not written by hand"}
HELP_COLUMNS = "100"


def _clean(doc: str) -> str:
    """A docstring as one line of markdown: RST ``literals`` become `code`, `|` is escaped for tables."""
    text = " ".join(inspect.cleandoc(doc).split())
    return text.replace("``", "`").replace("|", "\\|")


def attribute_docs(cls: type) -> dict[str, str]:
    """The string literal right under each annotated field of ``cls``, read from its source with ``ast``."""
    source = Path(inspect.getsourcefile(cls) or "").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            docs = {}
            body = node.body
            for stmt, following in zip(body, body[1:] + [None]):
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                if (
                    isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    docs[stmt.target.id] = _clean(following.value.value)
            return docs
    raise LookupError(f"class {cls.__name__} not found in its source file")


def _section_types(hint: Any) -> list[type]:
    """The dataclasses inside a type hint (``X``, ``X | None``, ``list[X]``)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return [hint]
    return [t for arg in typing.get_args(hint) for t in _section_types(arg)]


def sections() -> list[tuple[type, list[str]]]:
    """Every dataclass of a scenario file, in the order a reader meets it, with the paths that use it."""
    found: dict[type, list[str]] = {}

    def visit(cls: type, path: str) -> None:
        found.setdefault(cls, []).append(path)
        if len(found[cls]) > 1:
            return
        hints = typing.get_type_hints(cls, include_extras=True)
        # Sections first, lists of entries (``runs[]``) after them.
        for f in sorted(dataclasses.fields(cls), key=lambda f: typing.get_origin(hints[f.name]) is list):
            for sub in _section_types(hints[f.name]):
                is_list = typing.get_origin(hints[f.name]) is list
                visit(sub, f"{path}.{f.name}{'[]' if is_list else ''}".lstrip("."))

    visit(scenario_module.Scenario, "")
    return list(found.items())


def _anchor(cls: type) -> str:
    return cls.__name__.lower()


def _link(cls: type) -> str:
    """A link to a section's table, named by the first path that uses it."""
    paths = dict(sections())[cls]
    return f"[`{paths[0]}`](#{_anchor(cls)})"


def _type(hint: Any) -> str:
    """A type hint in words, for the reference table."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        base, *extras = args
        registries = [e for e in extras if isinstance(e, Registry)]
        if registries:
            return f"{registries[0].axis}: " + " \\| ".join(f"`{name}`" for name in registries[0].names())
        return _type(base)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict or hint is dict:
        return "mapping"
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return f"section {_link(hint)}"
    return f"`{getattr(hint, '__name__', str(hint))}`"


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return '""'
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return str(value)


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{_yaml(f.default)}`"
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return "its fields' defaults"
        return f"`{_yaml(value)}`"
    return "required"


def field_docs(cls: type) -> dict[str, str | None]:
    """Each field's doc: its docstring line; a section-typed field without one takes the section's class docstring."""
    own = attribute_docs(cls)
    hints = typing.get_type_hints(cls, include_extras=True)
    docs: dict[str, str | None] = {}
    for f in dataclasses.fields(cls):
        doc = own.get(f.name)
        if doc is None and dataclasses.is_dataclass(hints[f.name]) and hints[f.name].__doc__:
            doc = _clean(hints[f.name].__doc__.strip().splitlines()[0])
        docs[f.name] = doc
    return docs


def missing_docs() -> list[str]:
    """``Class.field`` of every scenario field without a doc (empty when the reference is complete)."""
    return [f"{cls.__name__}.{name}" for cls, _ in sections() for name, doc in field_docs(cls).items() if not doc]


def unlisted_dataclasses() -> list[str]:
    """Dataclasses of suite/config/scenario.py that are neither in the reference nor in NOT_SCENARIO_FIELDS."""
    listed = {cls.__name__ for cls, _ in sections()} | set(NOT_SCENARIO_FIELDS)
    defined = [
        name
        for name, obj in vars(scenario_module).items()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == scenario_module.__name__
    ]
    return [name for name in defined if name not in listed]


def scenario_reference() -> str:
    out = [
        "# Scenario fields",
        "",
        "<!-- Generated by ci/gen_docs.py from suite/config/scenario.py (`make docs`); do not edit: edit the field's docstring. -->",
        "",
        "Every field a scenario file may hold, generated from the schema in `suite/config/scenario.py`: the type, the default",
        "and the one line of documentation written under each field there. Validation (`suite/config/`: the schema, then `validation.py`) rejects",
        "unknown fields, wrong types and impossible combinations, naming the file and the field;",
        "[Scenarios](../scenarios.md) explains what a sweep means and lists the shipped scenarios.",
        "",
    ]
    for cls, paths in sections():
        title = "top level" if paths == [""] else ", ".join(f"`{p}`" for p in paths)
        out += [f"## {title} {{: #{_anchor(cls)} }}", ""]
        if cls.__doc__:
            out += [_clean(cls.__doc__), ""]
        out += ["| field | type | default | doc |", "|---|---|---|---|"]
        hints = typing.get_type_hints(cls, include_extras=True)
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            out.append(f"| `{f.name}` | {_type(hints[f.name])} | {_default(f)} | {docs[f.name] or '**undocumented**'} |")
        out.append("")
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of every sub-command, depth first."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((sub.prog, helps.get(name, ""), sub))
                found += _subcommands(sub)
    return found


def cli_reference() -> str:
    from suite.cli import build_parser

    parser = build_parser()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS  # argparse wraps help to the terminal's width: fix it for identical output
    try:
        return _cli_reference(parser)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _cli_reference(parser: argparse.ArgumentParser) -> str:
    out = [
        "# Command line",
        "",
        "<!-- Generated by ci/gen_docs.py from suite.cli.build_parser() (`make docs`); do not edit. -->",
        "",
        "The `suite` command's own help, for every sub-command (`python -m suite` works as well as `suite`;",
        "`python -m suite.worker RUN_DIR`, short for `suite.running.worker`, is the per-rank entry point).",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for prog, help_line, sub in _subcommands(parser):
        out += [f"## {prog}", ""]
        if help_line:
            out += [help_line[0].upper() + help_line[1:] + ".", ""]
        out += ["```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description="Generate docs/reference/ from the code.")
    cli.add_argument("out", nargs="?", default=str(ROOT / "docs" / "reference"))
    cli.add_argument("--check", action="store_true", help="only check that every scenario field has a doc")
    args = cli.parse_args(argv)
    problems = [f"{name}: no docstring" for name in missing_docs()]
    problems += [f"{name}: dataclass neither in the reference nor in NOT_SCENARIO_FIELDS" for name in unlisted_dataclasses()]
    for problem in problems:
        print(f"ci/gen_docs.py: suite/config/scenario.py: {problem}", file=sys.stderr)
    if problems or args.check:
        return 1 if problems else 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.md").write_text(scenario_reference())
    (out / "cli.md").write_text(cli_reference())
    print(f"wrote {out / 'scenario.md'} and {out / 'cli.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
