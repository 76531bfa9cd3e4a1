"""House rules of the code base that a linter does not check: one meaning per top-level name."""

import ast
from collections import defaultdict
from pathlib import Path

from conftest import REPO

SHARED = {"main", "log", "ENTRIES"}
"""Names that mean the same everywhere: a module's entry point, its logger and a strategy package's registry entries
(its ``entry`` module's, which :mod:`suite.config.registry` loads)."""


def top_level_names(path: Path) -> set[str]:
    """The public names a module defines at its top level (functions, classes, assigned names), type variables
    left out (``M = TypeVar("M", ...)`` is local to its module's signatures)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "TypeVar":
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_") and n not in SHARED}


def test_every_top_level_name_of_the_package_has_one_meaning():
    defined = defaultdict(list)
    for path in sorted((REPO / "suite").rglob("*.py")):
        for name in top_level_names(path):
            defined[name].append(str(path.relative_to(REPO)))
    twice = {name: paths for name, paths in defined.items() if len(paths) > 1}
    assert not twice, f"defined in more than one module (rename one, or import it from the other): {twice}"


def test_the_check_sees_a_name_defined_twice(tmp_path):
    (tmp_path / "a.py").write_text('from typing import TypeVar\nM = TypeVar("M")\nLIMIT = 1\ndef read(): ...\n_x = 0\n')
    assert top_level_names(tmp_path / "a.py") == {"LIMIT", "read"}
