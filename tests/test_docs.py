"""The documentation's generated references (ci/gen_docs.py): complete and deterministic."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "ci" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass
class _Example:
    documented: int = 1
    """A field with its docstring."""
    undocumented: int = 2
    also_documented: str = "x"
    """Another one."""


def test_attribute_docstrings_are_read_from_the_source(gen_docs):
    assert gen_docs.attribute_docs(_Example) == {"documented": "A field with its docstring.", "also_documented": "Another one."}


def test_every_scenario_field_has_a_doc_in_the_reference(gen_docs):
    assert gen_docs.missing_docs() == []
    assert gen_docs.unlisted_dataclasses() == []
    reference = gen_docs.scenario_reference()
    assert "undocumented" not in reference
    for cls, _ in gen_docs.sections():
        docs = gen_docs.field_docs(cls)
        for field in dataclasses.fields(cls):
            assert docs[field.name], f"{cls.__name__}.{field.name} has no docstring in suite/config/scenario.py"
            assert f"| `{field.name}` |" in reference


def test_the_reference_covers_every_section_of_a_scenario(gen_docs):
    from suite.config.scenario import RunSpec, Scenario, TrainConfig

    classes = [cls for cls, _ in gen_docs.sections()]
    assert classes[0] is Scenario
    assert RunSpec in classes and TrainConfig in classes
    hints = typing.get_type_hints(Scenario)
    for field in dataclasses.fields(Scenario):
        for section in gen_docs._section_types(hints[field.name]):
            assert section in classes


def test_references_are_deterministic(gen_docs, tmp_path):
    assert gen_docs.scenario_reference() == gen_docs.scenario_reference()
    first, second = tmp_path / "a", tmp_path / "b"
    assert gen_docs.main([str(first)]) == 0
    assert gen_docs.main([str(second)]) == 0
    for name in ("scenario.md", "cli.md"):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_cli_reference_has_every_sub_command(gen_docs):
    from suite.cli import build_parser

    reference = gen_docs.cli_reference()
    progs = [prog for prog, _, _ in gen_docs._subcommands(build_parser())]
    assert {"suite run", "suite report", "suite compare", "suite ruler train", "suite gpu-check"} <= set(progs)
    for prog in progs:
        assert f"## {prog}\n" in reference
        assert f"usage: {prog} " in reference
