"""The documentation's generated references (ci/gen_docs.py): complete, deterministic, made from the JSON Schema,
and committed as generated."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
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


@pytest.fixture(scope="module")
def schema():
    from suite.config.scenario import scenario_json_schema

    return scenario_json_schema()


def test_every_scenario_field_has_a_doc_in_the_reference(gen_docs, schema):
    assert gen_docs.missing_docs(schema) == []
    reference = gen_docs.scenario_reference(schema)
    assert "undocumented" not in reference
    for _, node, _ in gen_docs.sections(schema):
        for field in node["properties"]:
            assert f"| `{field}` |" in reference


def test_the_reference_covers_every_section_of_a_scenario(gen_docs, schema):
    from suite.config.scenario import Scenario, strategy_sections
    from suite.config.schema import _dataclasses_in

    names = [name for name, _, _ in gen_docs.sections(schema)]
    assert names[0] == "Scenario"
    own = {cls.__name__ for cls in strategy_sections().values()}  # the strategies' and losses' (cellular, wgan_gp)
    assert {"CellularConfig", "WganGpConfig"} <= own
    assert set(names) == {cls.__name__ for cls in _dataclasses_in(Scenario)} | own
    paths = dict((name, used) for name, _, used in gen_docs.sections(schema))
    assert paths["TrainConfig"] == ["train"] and paths["HorovodConfig"] == ["horovod", "runs[].horovod"]


def test_the_reference_shows_types_bounds_defaults_and_docs_from_the_schema(gen_docs, schema):
    reference = gen_docs.scenario_reference(schema)
    assert "| `repeats` | integer | ≥ 1, ≤ 1000 | `1` | Repeat every run this many times" in reference
    assert "| `lr` | number | > 0, ≤ 1000000.0 | `0.0002` | Adam learning rate (generator and discriminator). |" in reference
    assert "| `betas` | list of number | each ≥ 0, < 1 | `[0.5, 0.999]` | Adam betas. |" in reference
    assert "| `strategy` | `data_parallel` \\| `conditional` \\| `label_partitioned` \\| `cellular` |  | required |" in reference


def test_references_are_deterministic(gen_docs, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert gen_docs.main([str(first)]) == 0
    assert gen_docs.main([str(second)]) == 0
    for name in ("scenario.md", "cli.md", "scenario.schema.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    json.loads((first / "scenario.schema.json").read_text())


def test_the_committed_references_are_those_the_code_generates(gen_docs, tmp_path):
    committed = ROOT / "docs" / "reference"
    fresh = gen_docs.generated()
    assert sorted(p.name for p in committed.iterdir()) == sorted(fresh)
    for name, text in fresh.items():
        assert (committed / name).read_text() == text, f"docs/reference/{name} is stale: run `make docs` and commit it"
    assert gen_docs.main([str(committed), "--check"]) == 0
    (tmp_path / "scenario.md").write_text("stale")
    assert gen_docs.main([str(tmp_path), "--check"]) == 1


def test_the_schema_command_prints_the_committed_schema(capsys):
    from suite.cli import main

    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((ROOT / "docs" / "reference" / "scenario.schema.json").read_text())


def test_cli_reference_has_every_sub_command_and_the_exit_codes(gen_docs):
    from suite.cli import build_parser
    from suite.cli.exitcodes import exit_code_table

    reference = gen_docs.cli_reference()
    progs = [prog for prog, _, _ in gen_docs._subcommands(build_parser())]
    assert {"suite run", "suite report", "suite compare", "suite ruler train", "suite gpu-check", "suite schema"} <= set(progs)
    for prog in progs:
        assert f"## {prog}\n" in reference
        assert f"usage: {prog} " in reference
    assert exit_code_table() in reference


def test_an_installed_plugins_section_joins_the_schema(gen_docs, plugins):
    from suite.config import scenario

    schema = scenario.scenario_json_schema()
    section = schema["$defs"][schema["properties"]["local_sgd"]["$ref"].split("/")[-1]]
    assert section["properties"]["average_every"]["type"] == "integer"
    assert "local_sgd" in schema["$defs"]["RunSpec"]["properties"]  # a run entry may override it
    assert "sections" not in schema["properties"] and "sections" not in schema["$defs"]["RunSpec"]["properties"]
    assert "`average_every`" in gen_docs.scenario_reference(schema)


def test_every_link_of_the_readme_resolves_in_the_repository():
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {str(Path(f).parent) for f in tracked} | {p for f in tracked for p in map(str, Path(f).parents)}
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)]+)\)", (ROOT / "README.md").read_text())]
    local = [link.rstrip("/") for link in links if link and not link.startswith(("http:", "https:"))]
    assert local and [link for link in local if link not in tracked and link not in folders] == []


def test_every_error_rate_the_docs_quote_is_the_committed_files():
    """The README and the docs quote the verdict engine's error rates only as the committed file gives them: a
    figure from an older run of ci/resampled_rates.py, or a power figure at a spread that is not this run's, fails."""
    import pandas as pd

    from suite.analysis.stats.pair_tests import TEST

    rates = pd.read_csv(ROOT / "reports" / "verdicts" / "resampled-error-rates.csv")
    used = rates[(rates["test"] == TEST) & (rates["policy"] == rates["policy"].iloc[0])]
    worst = f"{(used['any_false'] / used['reports'] * 100).max():.1f}"
    readme = (ROOT / "README.md").read_text()
    (quoted,) = re.findall(r"a false\s+claim in at most ([\d.]+) % of simulated reports", readme)
    assert quoted == worst
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        # no fixed power figure: what a run could have found is on its own first page
        assert not re.search(r"found in [\d.]+ % of (simulated )?reports", text), path
