"""Generate the reference pages of the documentation site from the code (`make docs` runs it).

- ``docs/reference/scenario.schema.json``: the JSON Schema of a scenario file (``suite schema`` prints the same),
  made by pydantic from the dataclasses of ``suite/config/scenario.py``: types, bounds, defaults, the registered
  names as choices, and each field's doc from the docstring written under it. Editors validate scenarios with it.
- ``docs/reference/scenario.md``: one table per scenario section, generated FROM that JSON Schema (field, type,
  bounds, default, doc), so the page and the schema cannot disagree. A field's doc exists once, in the code.
- ``docs/reference/cli.md``: every sub-command's usage and help, from ``suite.cli.build_parser()``, and the exit codes
  (``suite.cli.exitcodes``).

All are written deterministically (same code, same bytes) and committed, so that links to them resolve on a fresh
clone; ``tests/test_docs.py`` checks that the committed files equal a fresh generation.
Usage: ``python ci/gen_docs.py [OUT_DIR]`` (default ``docs/reference``); ``--check`` writes nothing and exits 1,
naming the files, where OUT_DIR's files differ from a fresh generation or a scenario field has no doc.
Installed plugins are left out (``SUITE_NO_PLUGINS``); ``suite schema`` prints their sections too.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["SUITE_NO_PLUGINS"] = "1"  # the suite's own schema and commands: an installed plugin's are not committed

from suite.cli.exitcodes import exit_code_table  # noqa: E402
from suite.config.scenario import scenario_json_schema  # noqa: E402

HELP_COLUMNS = "100"


def _clean(doc: str) -> str:
    """A docstring as one line of markdown: RST ``literals`` become `code`, `|` is escaped for tables."""
    text = " ".join(inspect.cleandoc(doc).split())
    return text.replace("``", "`").replace("|", "\\|")


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[1] if ref else None


def _refs(node: Any) -> list[tuple[str, bool]]:
    """The sections a property holds (``(name, in a list)``): a ``$ref``, in ``anyOf`` or as the items of a list."""
    if not isinstance(node, dict):
        return []
    if (name := _ref_name(node)) is not None:
        return [(name, False)]
    found = [ref for option in node.get("anyOf", []) for ref in _refs(option)]
    if node.get("type") == "array":
        found += [(name, True) for name, _ in _refs(node.get("items"))]
    return found


def sections(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], list[str]]]:
    """Every section of a scenario file, as the reader meets it: ``(name, its schema, the paths that use it)``."""
    defs = schema.get("$defs", {})
    found: dict[str, list[str]] = {}
    order: list[tuple[str, dict[str, Any]]] = []

    def visit(name: str, node: dict[str, Any], path: str) -> None:
        if name in found:
            found[name].append(path)
            return
        found[name] = [path]
        order.append((name, node))
        props = node.get("properties", {})
        # sections first, lists of entries (``runs[]``) after them
        for field, prop in sorted(props.items(), key=lambda item: any(in_list for _, in_list in _refs(item[1]))):
            for ref, in_list in _refs(prop):
                visit(ref, defs[ref], f"{path}.{field}{'[]' if in_list else ''}".lstrip("."))

    visit("Scenario", schema, "")
    return [(name, node, found[name]) for name, node in order]


def _anchor(name: str) -> str:
    return name.lower()


def _type(node: dict[str, Any], paths: dict[str, str]) -> str:
    """A property's type in words."""
    if (name := _ref_name(node)) is not None:
        return f"section [`{paths[name]}`](#{_anchor(name)})"
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        text = " or ".join(_type(o, paths) for o in options)
        return text + (" or null" if len(options) < len(node["anyOf"]) else "")
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(node.get('items', {}), paths)}" if node.get("items") else "list"
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean", "object": "mapping"}.get(
        kind or "", "any"
    )


def _number(value: Any) -> str:
    return f"{value:,}".replace(",", " ") if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _bounds(node: dict[str, Any]) -> str:
    """A property's bounds (``≥ 1, ≤ 4096``), of its items for a list, of the value for ``X or null``."""
    for option in node.get("anyOf", []):
        if option.get("type") != "null" and (text := _bounds(option)):
            return text
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        inner = _bounds(node["items"])
        return f"each {inner}" if inner else ""
    marks = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
    return ", ".join(f"{mark} {_number(node[key])}" for key, mark in marks.items() if key in node)


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


def _default(field: str, node: dict[str, Any], required: list[str]) -> str:
    if "default" in node:
        return f"`{_yaml(node['default'])}`"
    if field in required:
        return "required"
    return "its fields' defaults" if _refs(node) else "see doc"


def _doc(node: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """A property's doc: its own description, else (a section) the section's first line."""
    if node.get("description"):
        return _clean(node["description"])
    for ref, _ in _refs(node):
        if defs[ref].get("description"):
            return _clean(defs[ref]["description"].strip().splitlines()[0])
    return None


def missing_docs(schema: dict[str, Any]) -> list[str]:
    """``Section.field`` of every scenario field without a doc (empty when the reference is complete)."""
    defs = schema.get("$defs", {})
    return [
        f"{name}.{field}"
        for name, node, _ in sections(schema)
        for field, prop in node.get("properties", {}).items()
        if not _doc(prop, defs)
    ]


def scenario_reference(schema: dict[str, Any]) -> str:
    """The scenario fields page, from the scenario file's JSON Schema."""
    out = [
        "# Scenario fields",
        "",
        "<!-- Generated by ci/gen_docs.py from the JSON Schema of suite/config/scenario.py (`make docs`); do not edit: "
        "edit the field's docstring. -->",
        "",
        "Every field a scenario file may hold, generated from its JSON Schema ([`scenario.schema.json`](scenario.schema.json),",
        "also printed by `suite schema`; point an editor's YAML support at it to check scenarios as you type): the type,",
        "the bounds, the default and the one line of documentation written under each field in `suite/config/scenario.py`.",
        "Validation reports every mistake of a file at once, each naming its field; floats must be finite. See",
        "[Scenarios](../scenarios.md) for what a sweep means and the shipped scenarios.",
        "",
    ]
    all_sections = sections(schema)
    paths = {name: used[0] or "top level" for name, _, used in all_sections}
    defs = schema.get("$defs", {})
    for name, node, used in all_sections:
        title = "top level" if used == [""] else ", ".join(f"`{p}`" for p in used)
        out += [f"## {title} {{: #{_anchor(name)} }}", ""]
        if node.get("description") and name != "Scenario":
            out += [_clean(node["description"]), ""]
        out += ["| field | type | bounds | default | doc |", "|---|---|---|---|---|"]
        required = node.get("required", [])
        for field, prop in node.get("properties", {}).items():
            out.append(
                f"| `{field}` | {_type(prop, paths)} | {_bounds(prop)} | {_default(field, prop, required)} | "
                f"{_doc(prop, defs) or '**undocumented**'} |"
            )
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
    out += ["## Exit codes", "", "One number per meaning, from `suite/cli/exitcodes.py`:", "", exit_code_table(), ""]
    return "\n".join(out)


def generated() -> dict[str, str]:
    """Every reference file by name, as this code generates it."""
    schema = scenario_json_schema()
    return {
        "scenario.schema.json": json.dumps(schema, indent=2) + "\n",
        "scenario.md": scenario_reference(schema),
        "cli.md": cli_reference(),
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description="Generate docs/reference/ from the code.")
    cli.add_argument("out", nargs="?", default=str(ROOT / "docs" / "reference"))
    cli.add_argument("--check", action="store_true", help="write nothing; exit 1 where OUT differs from the code")
    args = cli.parse_args(argv)
    problems = [f"{name}: no docstring" for name in missing_docs(scenario_json_schema())]
    for problem in problems:
        print(f"ci/gen_docs.py: suite/config/scenario.py: {problem}", file=sys.stderr)
    out = Path(args.out)
    files = generated()
    if args.check:
        stale = [name for name, text in files.items() if not (out / name).is_file() or (out / name).read_text() != text]
        for name in stale:
            print(f"ci/gen_docs.py: {out / name} differs from the code; run `make docs` and commit it", file=sys.stderr)
        return 1 if problems or stale else 0
    if problems:
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text)
    print(f"wrote {', '.join(str(out / name) for name in files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
