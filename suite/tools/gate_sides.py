"""The two sides of ``suite gate``: the candidate (this checkout, clean unless ``--allow-dirty``) and the baseline (a
git worktree of its revision, with the candidate's environment or, where ``ci/requirements.lock`` differs, its own from
``ci/setup.sh``), each run with its own code first on the path."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gate_settings import GateError, Settings

log = logging.getLogger(__name__)

REQUIREMENTS_LOCK = "ci/requirements.lock"

MAIN_BRANCHES = ("origin/main", "main", "origin/master", "master")


@dataclass
class Side:
    """One revision the gate runs: where its code is and which interpreter runs it."""

    name: str
    """``baseline`` (A) or ``candidate`` (B)."""
    label: str
    commit: str
    src: Path
    python: Path
    env: dict[str, str] = field(default_factory=dict)
    venv: str = "shared"

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "commit": self.commit, "src": str(self.src), "venv": self.venv, "env": self.env}


def git(repo: Path, *args: str) -> str:
    """Output of ``git -C repo ARGS`` (stripped); :class:`GateError` with git's message on failure."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise GateError(f"git {' '.join(args)}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'failed'}")
    return done.stdout.strip()


def repository() -> Path:
    """The checkout this suite's code runs from (the candidate)."""
    here = Path(__file__).resolve().parents[2]
    try:
        return Path(git(here, "rev-parse", "--show-toplevel"))
    except (GateError, FileNotFoundError):
        raise GateError(f"candidate: {here} is not a git checkout; the gate compares two revisions of one") from None


def baseline_commit(repo: Path, ref: str | None) -> tuple[str, str]:
    """(label, commit) of the baseline: ``ref``, or the merge base of HEAD with the main branch."""
    if ref is not None:
        try:
            return ref, git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except GateError:
            raise GateError(f"--baseline: no revision named {ref!r} in {repo}") from None
    for branch in MAIN_BRANCHES:
        try:
            git(repo, "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}")
        except GateError:
            continue
        return f"merge-base(HEAD, {branch})", git(repo, "merge-base", "HEAD", branch)
    raise GateError(f"--baseline: {repo} has no branch {' or '.join(MAIN_BRANCHES)}; name the baseline revision")


def candidate_side(repo: Path, settings: Settings) -> Side:
    """The checkout itself, refused when it has uncommitted changes (unless ``allow_dirty``)."""
    changes = git(repo, "status", "--porcelain", "--untracked-files=no").splitlines()
    if changes and not settings.allow_dirty:
        shown = ", ".join(line.split(maxsplit=1)[-1] for line in changes[:3]) + (", ..." if len(changes) > 3 else "")
        raise GateError(
            f"candidate: the working tree has {len(changes)} uncommitted change(s) ({shown}); "
            "commit or stash them, or pass --allow-dirty to measure the tree as it is"
        )
    env = {"SUITE_TEST_SLOWDOWN": str(settings.inject_slowdown)} if settings.inject_slowdown else {}
    label = "HEAD" + (" with uncommitted changes" if changes else "")
    return Side("candidate", label, git(repo, "rev-parse", "HEAD"), repo, Path(sys.executable), env)


def baseline_side(repo: Path, label: str, commit: str, out: Path) -> Side:
    """A worktree of ``commit`` under ``out``, with the candidate's venv or, if the lock differs, its own."""
    src = out / "baseline-src"
    remove_worktree(repo, src)
    shutil.rmtree(src, ignore_errors=True)
    git(repo, "worktree", "prune")
    git(repo, "worktree", "add", "--detach", str(src), commit)
    same_lock = (
        subprocess.run(["git", "-C", str(repo), "diff", "--quiet", commit, "HEAD", "--", REQUIREMENTS_LOCK]).returncode == 0
    )
    if same_lock:
        return Side("baseline", label, commit, src, Path(sys.executable))
    venv = out / "baseline-venv"
    log.info("baseline: %s differs from the candidate's; building its own environment in %s", REQUIREMENTS_LOCK, venv)
    done = subprocess.run(
        ["bash", "ci/setup.sh"], cwd=src, env={**os.environ, "SUITE_VENV": str(venv.resolve())}, capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise GateError(f"baseline: its ci/setup.sh failed ({last[0]})")
    return Side("baseline", label, commit, src, venv / "bin" / "python", venv="own")


def remove_worktree(repo: Path, src: Path) -> None:
    """Unregister and delete the baseline's worktree (its results stay in the output folder)."""
    if src.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(src)], capture_output=True)


def side_env(side: Side) -> dict[str, str]:
    """The environment of a side's processes: its code first on the path, its knobs, nothing of the other's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUITE_TEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(side.src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(side.env)
    return env


def check_side_imports(side: Side) -> None:
    """Refuse a side whose interpreter would import the suite from somewhere else than its own source."""
    done = subprocess.run(
        [str(side.python), "-c", "import suite, pathlib; print(pathlib.Path(suite.__file__).resolve())"],
        cwd=side.src,
        env=side_env(side),
        capture_output=True,
        text=True,
    )
    where = Path(done.stdout.strip()) if done.returncode == 0 else None
    if where is None or side.src.resolve() not in where.parents:
        raise GateError(
            f"{side.name}: {side.python} imports the suite from {where or done.stderr.strip()[-200:]}, not {side.src}"
        )
