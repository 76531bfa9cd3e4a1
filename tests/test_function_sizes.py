"""Functions read top to bottom: none of ``suite/`` or ``ci/`` is longer than :data:`MAX_LINES`, and no constructor
takes more than :data:`MAX_PARAMETERS` (settings travel as the frozen section or plan they come from)."""

import ast
from pathlib import Path

from conftest import REPO

MAX_LINES = 80
"""A function's lines from its ``def`` to its last line, decorators not counted."""
MAX_PARAMETERS = 8
"""A constructor's named parameters, ``self`` and ``cls`` not counted (nor ``*args`` and ``**kwargs``)."""
CONSTRUCTOR_PREFIXES = ("new_", "make_", "build_", "create_")
"""Besides ``__init__`` and ``__new__``: the functions named as factories."""
ROOTS = ("suite", "ci")

# restructured on branch analysis/parts; the lead empties this list at merge
ALLOWED_LONG = {
    ("suite/running/worker.py", "execute"),
}


def _named_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _is_constructor(name: str) -> bool:
    return name in ("__init__", "__new__") or name.startswith(CONSTRUCTOR_PREFIXES)


def offenders(path: Path, relative: str) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """The functions of ``path`` longer than :data:`MAX_LINES` and the constructors with more than
    :data:`MAX_PARAMETERS` parameters: ``(relative, name, count)`` each."""
    long, wide = [], []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assert node.end_lineno is not None
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES:
            long.append((relative, node.name, lines))
        parameters = len(_named_parameters(node))
        if _is_constructor(node.name) and parameters > MAX_PARAMETERS:
            wide.append((relative, node.name, parameters))
    return long, wide


def _walk() -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    long, wide = [], []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            more_long, more_wide = offenders(path, path.relative_to(REPO).as_posix())
            long += more_long
            wide += more_wide
    return long, wide


def test_no_function_of_the_package_or_ci_is_over_80_lines():
    long, _ = _walk()
    new = [f"{path} {name}: {lines} lines" for path, name, lines in long if (path, name) not in ALLOWED_LONG]
    assert not new, f"over {MAX_LINES} lines (restructure where it does two things): {new}"
    stale = ALLOWED_LONG - {(path, name) for path, name, _ in long}
    assert not stale, f"no longer over {MAX_LINES} lines: take them out of ALLOWED_LONG: {sorted(stale)}"


def test_no_constructor_takes_more_than_8_parameters():
    _, wide = _walk()
    assert not wide, f"constructors over {MAX_PARAMETERS} parameters (pass the frozen section or plan): {wide}"


def test_the_walk_sees_a_long_function_and_a_wide_constructor(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))  # with its def: one line over
    wide = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS + 1))
    source = (
        f"@staticmethod\ndef long():\n{body}\n\n"
        f"def short():\n    return 1\n\n"
        f"class C:\n    def __init__(self, {wide}):\n        pass\n\n"
        f"    def method(self, {wide}):\n        pass\n\n"
        f"def make_c(*args, {', '.join(f'b{i}' for i in range(MAX_PARAMETERS))}, **kwargs):\n    pass\n"
    )
    (tmp_path / "a.py").write_text(source)
    long, wide_found = offenders(tmp_path / "a.py", "a.py")
    assert long == [("a.py", "long", MAX_LINES + 1)]
    assert wide_found == [("a.py", "__init__", MAX_PARAMETERS + 1)]
