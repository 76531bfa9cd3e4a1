"""``SUITE_*`` environment variables are settings: each is checked at start-up, all together, before anything runs.

The ``suite`` command and every rank call :func:`check_environment` first, so that a wrong value is one line naming the
variable and its values (exit code 2), not a rank's traceback or a value silently ignored. :data:`SETTINGS` lists
every variable, the tests' hooks and the ``ci/`` scripts' among them.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from .escape import one_line
from .names import did_you_mean

log = logging.getLogger(__name__)

PREFIX = "SUITE_"

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The values of ``SUITE_LOG``: the ranks' logging level."""

DEVICES = ("auto", "cpu")
"""The values of ``SUITE_DEVICE``: ``auto`` trains on the GPU where CUDA is present, ``cpu`` on the CPU always."""


class EnvironmentSettingError(ValueError):
    """``SUITE_*`` variables set to values they do not take; one line per variable, naming it and its values."""


@dataclass(frozen=True)
class EnvSetting:
    """One ``SUITE_*`` variable: what it is for, the values it takes (in words) and the check of a value."""

    purpose: str
    takes: str
    accepts: Callable[[str], bool]


def _any(value: str) -> bool:
    return True


def _choices(*values: str) -> Callable[[str], bool]:
    return lambda value: value in values


def _whole(least: int) -> Callable[[str], bool]:
    def accepts(value: str) -> bool:
        return bool(re.fullmatch(r"[0-9]{1,18}", value.strip())) and int(value) >= least

    return accepts


def _number(value: str) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and 0 <= number <= 1000


def _folder(value: str) -> bool:
    """A path that is not an existing file or other non-folder (it may not exist yet: the suite makes it)."""
    path = os.path.expanduser(value)
    return bool(value) and "\0" not in value and (not os.path.lexists(path) or os.path.isdir(path))


def _file(value: str) -> bool:
    return bool(value) and "\0" not in value and os.path.isfile(os.path.expanduser(value))


def _owner(value: str) -> bool:
    return bool(re.fullmatch(r"[^\s:]{1,255}:[0-9]{1,10}:[0-9]{1,20}", value))


_FLAG = "1 (on) or 0 (off)"
_CI = "read by the ci/ scripts, not by the suite"

SETTINGS: dict[str, EnvSetting] = {
    "SUITE_LOG": EnvSetting("the ranks' logging level", ", ".join(LOG_LEVELS), _choices(*LOG_LEVELS)),
    "SUITE_DEVICE": EnvSetting(
        "where the ranks train: auto (the GPU where CUDA is present) or cpu", ", ".join(DEVICES), _choices(*DEVICES)
    ),
    "SUITE_DATA": EnvSetting("the datasets' folder", "a folder (made when missing)", _folder),
    "SUITE_CACHE": EnvSetting("the suite's cache (statistics, datasets)", "a folder (made when missing)", _folder),
    "SUITE_RULERS": EnvSetting("the folder of rulers a user makes", "a folder (made when missing)", _folder),
    "SUITE_INCEPTION_WEIGHTS": EnvSetting("pytorch-fid's Inception weights", "an existing file", _file),
    "SUITE_INCEPTION_DOWNLOAD": EnvSetting("let pytorch-fid download its weights", _FLAG, _choices("0", "1")),
    "SUITE_NO_PLUGINS": EnvSetting("leave installed plugins out", _FLAG, _choices("0", "1")),
    "SUITE_RUN_OWNER": EnvSetting("the mark suite run puts on what it starts", "HOST:PID:START, set by suite run", _owner),
    "SUITE_TEST_FAIL_AT_STEP": EnvSetting("test hook: a rank fails after this step", "a whole number from 0", _whole(0)),
    "SUITE_TEST_FAIL_RANK": EnvSetting("test hook: the rank that fails or diverges", "a whole number from 0", _whole(0)),
    "SUITE_TEST_FAIL_RUN": EnvSetting("test hook: the run (its id) in which the rank fails", "a run id", _any),
    "SUITE_TEST_FAIL_HOW": EnvSetting("test hook: how the rank fails", "raise or kill", _choices("raise", "kill")),
    "SUITE_TEST_DIVERGE_AT_STEP": EnvSetting("test hook: a rank diverges at this step", "a whole number from 1", _whole(1)),
    "SUITE_TEST_SLOWDOWN": EnvSetting("measurement knob: slow every step by this fraction", "a number from 0 to 1000", _number),
    "SUITE_FUZZ_EXAMPLES": EnvSetting("the tests' cases per reader", "a whole number from 1", _whole(1)),
    "SUITE_VENV": EnvSetting("the virtual environment ci/setup.sh makes", _CI, _any),
    "SUITE_WHEEL_CACHE": EnvSetting("where ci/ keeps built wheels", _CI, _any),
    "SUITE_HOROVOD_BUILD_ONLY": EnvSetting("ci/ builds Horovod without installing it", _CI, _any),
    "SUITE_CLUSTER_STATE": EnvSetting("the cluster test's state folder", _CI, _any),
    "SUITE_CLUSTER_TEST_DIR": EnvSetting("the cluster test's folder", _CI, _any),
}
"""Every ``SUITE_*`` variable the suite or its scripts read."""


def environment_problems(env: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of the ``SUITE_*`` variables of ``env`` (default: this process's): one line per variable
    set to a value it does not take, naming it and its values; one note per unknown ``SUITE_*`` name. An empty
    value is as good as unset."""
    env = os.environ if env is None else env
    problems, notes = [], []
    for name in sorted(n for n in env if n.startswith(PREFIX)):
        value = env[name]
        setting = SETTINGS.get(name)
        if setting is None:
            notes.append(f"{one_line(name)}: not a variable the suite reads{did_you_mean(name, SETTINGS)}; it is ignored")
        elif value != "" and not setting.accepts(value):
            shown = one_line(value[:200]) + ("..." if len(value) > 200 else "")
            problems.append(f"{name}={shown}: {setting.purpose}; it takes {setting.takes}")
    return problems, notes


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Check every ``SUITE_*`` variable (:func:`environment_problems`): unknown names in one warning line each, then
    :class:`EnvironmentSettingError` listing every variable set to a value it does not take."""
    problems, notes = environment_problems(env)
    for note in notes:
        log.warning("%s", note)
    if len(problems) == 1:
        raise EnvironmentSettingError(problems[0])
    if problems:
        listed = " ".join(f"({i}) {problem}" for i, problem in enumerate(problems, 1))  # one line, as every refusal
        raise EnvironmentSettingError(f"{len(problems)} environment variables are wrong: {listed}")
