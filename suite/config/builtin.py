"""The built-in scenarios: the repository's ``scenarios/*.yaml``, shipped with the package as ``suite/scenarios_data``.

In the checkout ``suite/scenarios_data`` is a link to ``../scenarios`` (the source of truth); a wheel holds copies of
the files (``pyproject.toml``'s package data), so that ``suite run quickstart`` finds its scenario outside the
checkout. ``suite scenarios`` lists them; :func:`resolve_scenario` turns what ``suite run`` was given (a path, or a
built-in scenario's name) into a file, or says which name was meant.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from .escape import one_line
from .names import current_name, did_you_mean
from .yamlfile import YamlError, load_yaml

log = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "scenarios_data"
"""Where the built-in scenarios are: the package's ``scenarios_data`` folder."""


class UnknownScenario(ValueError):
    """Neither a scenario file nor a built-in scenario's name; the message says which names come close."""


@dataclass(frozen=True)
class BuiltinScenario:
    name: str
    """The file's stem, which ``suite run NAME`` takes (its ``name:`` field names its results folder)."""
    description: str
    path: Path


def builtin_scenarios(folder: Path = BUILTIN_DIR) -> list[BuiltinScenario]:
    """The built-in scenarios by name, each with its ``description`` (a file that does not parse says so instead)."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = load_yaml(path)
            description = str(data.get("description", "")) if isinstance(data, dict) else ""
        except YamlError as error:
            description = f"(does not parse: {error})"
        found.append(BuiltinScenario(path.stem, " ".join(description.split()), path))
    return found


def _shadowing(path: Path, given: str, folder: Path) -> None:
    """Warn, in one line, where the file ``given`` names (a bare name in the working folder) has a built-in scenario's
    name but not its text: the file runs, and the line says so and how to run the built-in one."""
    name = given[: -len(".yaml")] if given.endswith(".yaml") else given
    if os.sep in given or (os.altsep and os.altsep in given):
        return  # a path: the user named that file
    builtin = folder / f"{name}.yaml"
    if not name or "/" in name or not builtin.is_file() or not path.is_file():
        return
    with contextlib.suppress(OSError):
        if path.read_bytes() == builtin.read_bytes():
            return
    log.warning(
        "warning: %s: runs the file %s in the working folder, not the built-in scenario %s of that name; "
        "run the built-in one as %s",
        one_line(given),
        one_line(f".{os.sep}{given}"),
        name,
        shlex.quote(str(builtin)),
    )


def resolve_scenario(given: str | Path, folder: Path = BUILTIN_DIR) -> Path:
    """The scenario file ``given`` names: a path that exists, as it is; else the renamed file of a path under its old
    name (``scenarios/papers/seed000-mnist.yaml`` -> ``paper000-mnist.yaml``, :data:`~suite.config.names.RENAMED_PREFIXES`);
    else a built-in scenario of that name (with or without ``.yaml``). Raise :class:`UnknownScenario` naming the closest
    built-in names where none is found."""
    path = Path(given)
    if path.exists():
        _shadowing(path, str(given), folder)
        return path
    renamed = path.with_name(current_name(path.name))
    if renamed != path and renamed.is_file():
        log.warning("%s: renamed %s; running that", path, renamed.name)
        return renamed
    text = str(given)
    name = text[: -len(".yaml")] if text.endswith(".yaml") else text
    by_name = {one.name: one.path for one in builtin_scenarios(folder)}
    if name in by_name:
        return by_name[name]
    raise UnknownScenario(
        f"{text}: no such scenario file, nor a built-in scenario of that name{did_you_mean(Path(name).name, by_name, n=3)};"
        " `suite scenarios` lists the built-in ones"
    )
