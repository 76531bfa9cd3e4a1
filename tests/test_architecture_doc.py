"""docs/architecture.md is the code's: the modules and paths it names exist, every package of the suite stands in its
layers and its layout, the layers and contracts it states are pyproject.toml's import-linter contracts, and the names
of the record's route are real code."""

import ast
import importlib
import re
from pathlib import Path

import pytest

from conftest import REPO

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

DOC = (REPO / "docs/architecture.md").read_text()
PROSE = re.sub(r"```python\n.*?```", "", DOC, flags=re.S)
"""The doc but its Python examples (an engine one might add: ``suite/train/engines/gloo.py``)."""
SUITE = REPO / "suite"
PACKAGES = sorted(p.name for p in SUITE.iterdir() if (p / "__init__.py").is_file())
CONTRACTS = {c["id"]: c for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
ROOTS = ("suite", "tests", "ci", "docs", "examples", "scenarios", "baselines", "reports")
"""The checkout's folders whose paths the doc names; other paths (``results/NAME/...``) are what a run writes."""


def _section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _layers_block() -> str:
    return _section("Layers").split("```text\n", 1)[1].split("```", 1)[0]


def _module_path(dotted: str) -> Path | None:
    """The file or package of module ``dotted`` (``suite.x.y``), None where there is none."""
    base = REPO.joinpath(*dotted.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return base if (base / "__init__.py").is_file() else None


def _defined(path: Path) -> dict[str, set[str]]:
    """The names module ``path`` binds at its top level, each with the names its class body binds (its fields and
    methods; empty for a function or constant)."""
    if path.is_dir():
        path = path / "__init__.py"
    names: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {
                n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else n.target.id  # type: ignore[union-attr]
                for n in node.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                or (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
            }
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: set() for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: set() for a in node.names})
    return names


def _resolves(dotted: str) -> bool:
    """Whether ``suite.x.y[.Name[.member]]`` names a module of the suite, a name it defines, and that name's member."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_path(".".join(parts[:cut]))
        if path is not None:
            rest = parts[cut:]
            if not rest:
                return True
            defined = _defined(path)
            return rest[0] in defined and (len(rest) == 1 or (len(rest) == 2 and rest[1] in defined[rest[0]]))
    return False


def test_every_module_the_doc_names_exists():
    dotted = set(re.findall(r"\bsuite(?:\.\w+)+", PROSE))
    # within backticks, a module named from the suite's package down: `analysis.stats.paired`, `running.gpucheck`
    dotted |= {f"suite.{t}" for t in re.findall(r"`((?:\w+\.)+\w+)`", PROSE) if t.split(".")[0] in PACKAGES}
    dotted = {d for d in dotted if not d.endswith(".py")}
    assert dotted, "the doc names modules"
    missing = sorted(d for d in dotted if not _resolves(d))
    assert not missing, f"docs/architecture.md names modules or names that the code does not have: {missing}"


def test_every_path_the_doc_names_exists():
    found = set(re.findall(r"(?<![\w./-])((?:[\w-]+/)+(?:[\w-]+\.\w+)?)", PROSE))
    paths = {p for p in found if not re.search(r"\b[A-Z_]{3,}\b", p)}  # not a placeholder: scenarios/NAME.yaml
    # a path from a package down (`config/plan.py`, `cli/running.py`) is the suite's
    checked = {p for p in paths if p.split("/")[0] in ROOTS} | {f"suite/{p}" for p in paths if p.split("/")[0] in PACKAGES}
    assert len(checked) > 10, "the doc names paths"
    missing = sorted(p for p in checked if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names paths that the checkout does not have: {missing}"


def _layout() -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^\| `suite/(\w+)/` \| (.*) \|$", _section("Layout"), re.M)}


def test_the_layout_names_every_module_of_every_package_and_only_those():
    rows = _layout()
    assert sorted(rows) == PACKAGES, "the layout has one row per package of the suite"
    for package, text in rows.items():
        folder = SUITE / package
        named_files = set(re.findall(r"`(\w+)\.py`", text))
        named_folders = set(re.findall(r"`(\w+)/`", text))
        under = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
        under |= {p.name for p in REPO.iterdir() if p.is_dir()}  # the checkout's own folders: `scenarios/`
        assert named_files <= under, f"suite/{package}/: the layout names modules it does not have: {named_files - under}"
        assert named_folders <= under, f"suite/{package}/: the layout names folders it does not have: {named_folders - under}"
        words = set(re.findall(r"\w+", text))
        own = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
        own |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        assert own <= words, f"suite/{package}/: the layout does not name {sorted(own - words)}"


def _block_layers() -> list[tuple[str, str]]:
    """The layers block's lines from the top: ``(package, what the line lists)``; a ``+--`` line is marked ``+``."""
    lines: list[tuple[str, str]] = []
    for line in _layers_block().splitlines():
        found = re.match(r"^\s*(\+-- )?suite/(\w+)/\s+(.*)$", line)
        if found:
            lines.append((("+" if found[1] else "") + found[2], found[3]))
        elif line.strip().startswith("->") and lines:  # a chain continued
            lines[-1] = (lines[-1][0], f"{lines[-1][1]} {line.strip()}")
    return lines


def test_every_package_stands_in_the_layers_in_the_contracts_order():
    layers: list[set[str]] = []
    previous_sibling = False
    for name, _ in _block_layers():
        sibling = name.startswith("+")
        if sibling and previous_sibling:
            layers[-1].add(name[1:])
        else:
            layers.append({name.lstrip("+")})
        previous_sibling = sibling
    assert sorted(set().union(*layers)) == PACKAGES, "the layers block names every package of the suite once"
    stated = [{m.strip().removeprefix("suite.") for m in layer.split("|")} for layer in CONTRACTS["layers"]["layers"]]
    assert layers == stated, f"the layers block stacks {layers}; pyproject.toml's `layers` contract {stated}"


def _chain(text: str) -> list[set[str]]:
    text = re.sub(r"\([^)]*\)", "", text.split(":", 1)[0])
    return [{m.strip().rstrip("/") for m in part.split("|")} for part in text.split("->")]


def test_what_each_layer_lists_exists_and_its_chain_is_its_contract():
    for name, text in _block_layers():
        package = name.lstrip("+")
        # `stats/ (verdicts, ...)`: a folder's own modules
        for sub, inner in re.findall(r"(\w+)/\s*\(([^)]*)\)", text):
            for module in re.findall(r"\w+", inner):
                assert _module_path(f"suite.{package}.{sub}.{module}"), f"suite/{package}/{sub}/ has no {module}"
        listed = re.sub(r"\([^)]*\)", "", text.split(":", 1)[0])
        for module in re.findall(r"\w+", listed):
            assert _module_path(f"suite.{package}.{module}"), f"the layers block lists {module} under suite/{package}/"
        if "->" in text:
            contract = next(c for c in CONTRACTS.values() if c.get("containers") == [f"suite.{package}"])
            stated = [{m.strip() for m in layer.split("|")} for layer in contract["layers"]]
            assert _chain(text) == stated, f"suite/{package}/: the block says {_chain(text)}, contract {contract['id']} {stated}"


def test_the_contracts_table_is_pyproject_toml_s():
    table = _section("Layers").split("| contract | kind | what it keeps |", 1)[1]
    rows = {m[1]: (m[2], m[3]) for m in re.finditer(r"^\| `(\w+)` \| (\w+) \| (.*) \|$", table, re.M)}
    assert sorted(rows) == sorted(CONTRACTS), "the table has one row per import-linter contract"
    for cid, (kind, text) in rows.items():
        contract = CONTRACTS[cid]
        assert kind == contract["type"], f"contract {cid} is of type {contract['type']}, the table says {kind}"
        if cid == "layers":
            continue  # the stack of packages: the layers block above, checked against it
        modules = [m.strip() for layer in contract.get("layers", contract.get("modules", [])) for m in layer.split("|")]
        named = set(re.findall(r"`(\w+)`", text))
        unnamed = {m.split(".")[-1] for m in modules} - named
        assert not unnamed, f"the row of contract {cid} does not name {sorted(unnamed)}"


def _code_names() -> set[str]:
    names: set[str] = set()
    for path in SUITE.rglob("*.py"):
        for name, members in _defined(path).items():
            names |= {name, *members}
    return names


def test_the_record_s_route_names_real_code():
    route = next(p for p in _section("Data flow of one scenario").split("\n\n") if p.startswith("A run's record travels"))
    names = {n for n in re.findall(r"`([A-Za-z_]\w*(?:\.\w+)*)`", route) if not n.endswith(".py")}
    assert {"parse_record", "record_data"} <= names, "the paragraph describes the record's route"
    code = _code_names()
    missing = set()
    for name in names:
        if name.startswith("suite."):
            ok = _resolves(name)
        elif "." in name:  # a standard library's function: `dataclasses.replace`
            module, attr = name.rsplit(".", 1)
            ok = hasattr(importlib.import_module(module), attr)
        else:
            ok = name in code
        if not ok:
            missing.add(name)
    assert not missing, f"the record's route names what the code does not define: {sorted(missing)}"
    for module in re.findall(r"`(\w+)\.py`", route):
        assert (SUITE / "records" / f"{module}.py").is_file(), f"the record's route names records/{module}.py"


def test_record_data_is_said_to_write_every_field():
    assert not re.search(r"leaves? out (?:the )?None|None fields? (?:are )?left out", DOC), (
        "record_data writes every field, null where the run has none (tests/test_record.py)"
    )
    assert "every field written, null where the run has none" in DOC
