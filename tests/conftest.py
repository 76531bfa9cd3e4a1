"""Shared fixtures: an isolated cache, and running small scenarios through the real `suite run`."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch.distributed as dist
import yaml

from suite.train.engines.base import Group

REPO = Path(__file__).resolve().parent.parent

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs the in-process tests on two workers, one per core: torch's own pool of a thread per core in
    # each would put four busy threads on two cores (a test that compares thread counts sets them itself)
    import torch

    torch.set_num_threads(1)

# The two-node cluster tests run only inside the cluster `make cluster-test` builds (ci/cluster/run.sh
# names it in SUITE_CLUSTER_STATE); elsewhere, `make test` included, they are not collected.
collect_ignore_glob = [] if os.environ.get("SUITE_CLUSTER_STATE") else ["cluster/*"]


def pytest_collection_modifyitems(items):
    """A test that reads the shared small sweep is ``quiet``: the compare tests judge images/s against the noise between
    its repeats, so its runs must not share the cores with another test's launch."""
    for item in items:
        if "small_sweep" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.quiet)


# The tests see the suite's own strategies, losses and engines, whatever plugins the environment has installed;
# the `plugins` fixture brings the installed ones in (tests/test_plugins.py).
os.environ["SUITE_NO_PLUGINS"] = "1"


@pytest.fixture
def plugins(monkeypatch):
    """The registries with the installed plugins loaded (and launched ranks loading them); restored afterwards."""
    from suite.config import registry

    monkeypatch.delenv(registry.NO_PLUGINS, raising=False)
    axes = (registry.STRATEGIES, registry.ENGINES, registry.LOSSES)
    saved = [(axis, dict(axis._entries), dict(axis.plugins)) for axis in axes]
    for axis in axes:
        axis._plugins_loaded = False
    yield registry
    for axis, entries, loaded in saved:
        axis._entries, axis.plugins, axis._plugins_loaded = entries, loaded, True


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Classifiers and real-data statistics go to a per-session cache (shared by launched ranks)."""
    cache = tmp_path_factory.mktemp("suite-cache")
    previous = os.environ.get("SUITE_CACHE")
    os.environ["SUITE_CACHE"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("SUITE_CACHE", None)
    else:
        os.environ["SUITE_CACHE"] = previous


def tiny_scenario(name: str, runs: list[dict], **sections) -> dict:
    """A scenario small enough for tests: 20x20 digits, a few steps, metrics off unless asked."""
    scenario = {
        "name": name,
        "dataset": {"name": "digits", "image_size": 20},
        "train": {"epochs": 1, "steps": 3, "batch_size": 32, "warmup_steps": 1},
        "metrics": {"enabled": False},
        "runs": runs,
    }
    for key, value in sections.items():
        scenario[key] = {**scenario.get(key, {}), **value}
    return scenario


def run_scenario(tmp_path: Path, scenario: dict, *extra: str) -> tuple[int, dict[str, dict]]:
    """Write ``scenario`` to YAML, run it with `suite run`, return (exit code, records' data by run id)."""
    from suite.cli import main
    from suite.records.codec import record_data
    from suite.records.results import iter_records

    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "results"
    code = main(["run", str(path), "--out", str(out), "-q", "--timeout", "600", *extra])
    # each record's data as its result.json holds it (a field that is None is left out)
    records = {r.run_id: record_data(r) for r in iter_records(out)} if out.is_dir() else {}
    return code, records


SMALL_SWEEP_CLASSES = [0, 1, 2]
"""The digits the shared small sweep learns (three: a label-partitioned step is one step of each of 3 class GANs)."""


SMALL_SWEEP_BUDGET = 576
"""The images budget of the small sweep's budgeted runs: whole steps of every kind of system (36 data-parallel steps of
16 images, 12 label-partitioned ones of 48, 9 cellular iterations of 64)."""


def small_sweep_scenario() -> dict:
    """One small scenario whose runs serve the tests that check what real runs leave, each its own entries: the compare
    tests' data-parallel runs at P = 1 and 2 (two repeats), the budget tests' systems under one images budget and one
    time budget, and the tuning test's sweep. Its runs share launches (an engine, a process count, ranks per node: 3
    launches, not one per test); every entry keeps the training settings of the test it serves."""
    budget = {"budget_images": SMALL_SWEEP_BUDGET, "batch_size": 16}
    runs = [
        # compare (tests/test_compare.py), also the record tests/test_gpucheck.py, test_progress_and_json.py and
        # test_hostile_names.py read: data-parallel MPI at P = 1 and 2, 40 steps
        {"strategy": "data_parallel", "engine": "mpi", "procs": [1, 2], "train": {"steps": 40}},
        # budgets (tests/test_budgets.py): the three kinds of system under one images budget, and one time budget
        {"strategy": "data_parallel", "engine": "mpi", "procs": [2], "label": "budgeted", "train": budget},
        {"strategy": "label_partitioned", "engine": "mpi", "procs": [2], "train": budget},
        {"strategy": "cellular", "engine": "mpi", "grid": [1, 2], "procs": [1], "train": budget},
        {
            "strategy": "data_parallel",
            "engine": "mpi",
            "procs": [1],
            "label": "timed",
            "train": {**budget, "budget_images": None, "budget_s": 2.0, "steps": None},
        },
        {  # one step, and it is the warm-up: no timed step
            "strategy": "data_parallel",
            "engine": "mpi",
            "procs": [1],
            "label": "warmonly",
            "train": {**budget, "budget_images": None, "steps": 1},
        },
        # tuning (tests/test_tuning.py): a sweep of the W-CGAN's learning rate
        {
            "strategy": "label_partitioned",
            "engine": "mpi",
            "loss": "wgan-gp",
            "procs": [1],
            "sweep": {"wgan_gp.lr": [0.0001, 0.001]},
            "train": {"steps": 2},
        },
    ]
    scenario = tiny_scenario(
        "small-sweep",
        runs,
        dataset={"classes": SMALL_SWEEP_CLASSES},
        train={"warmup_steps": 1, "threads": 1},
        cellular={"batches_per_iteration": 3, "fitness_samples": 32, "mixture_samples": 40},
        wgan_gp={"n_critic": 1},
        metrics={"enabled": True, "features": "classifier", "samples": 150, "curve_points": 2},
    )
    scenario["repeats"] = 2  # the compare tests' noise: two repeats of their configurations (SMALL_SWEEP_ONLY)
    return scenario


SMALL_SWEEP_ONLY = ["*-r0", "data_parallel-bce-mpi-p?-r1"]
"""The runs of the shared small sweep that run: every entry's first repeat, and the compare runs' second."""


@dataclass
class SmallSweep:
    """The shared small sweep's outcome: its folder, scenario (dict and file), exit code, records by run id, the JSON
    document `suite run --json` printed, and the UTC times just before and after it ran."""

    folder: Path
    scenario: dict
    path: Path
    code: int
    records: dict[str, dict]
    document: dict
    before: dt.datetime
    after: dt.datetime
    _subsets: dict[str, Path] = field(default_factory=dict)

    @property
    def results(self) -> Path:
        return self.folder / "results"

    @property
    def tensorboard(self) -> Path:
        return self.folder / "tb"

    def subset(self, name: str, run_ids: list[str]) -> Path:
        """A results folder of its own holding copies of the run folders ``run_ids`` (made once per name): what a test
        reads as the whole output of a sweep of those runs alone. Tests that edit records edit copies of it."""
        if name not in self._subsets:
            folder = self.folder / "subsets" / name
            for run_id in run_ids:
                shutil.copytree(self.results / run_id, folder / run_id, symlinks=True)
            self._subsets[name] = folder
        return self._subsets[name]


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory) -> SmallSweep:
    """The shared small sweep (:func:`small_sweep_scenario`), run once per session with `suite run --json
    --tensorboard` (events change no training) and ``--only`` :data:`SMALL_SWEEP_ONLY`."""
    from suite.cli import main
    from suite.records.codec import record_data
    from suite.records.results import iter_records

    folder = tmp_path_factory.mktemp("small-sweep")
    scenario = small_sweep_scenario()
    path = folder / "small-sweep.yaml"
    path.write_text(yaml.safe_dump(scenario))
    printed = io.StringIO()
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    with contextlib.redirect_stdout(printed):
        code = main(
            ["run", str(path), "--out", str(folder / "results"), "-q", "--json", "--timeout", "600"]
            + ["--tensorboard", str(folder / "tb"), "--only", *SMALL_SWEEP_ONLY]
        )
    after = dt.datetime.now(dt.timezone.utc)
    records = {r.run_id: record_data(r) for r in iter_records(folder / "results")}
    return SmallSweep(folder, scenario, path, code, records, json.loads(printed.getvalue()), before, after)


def launched_runs(printed: str) -> list[str]:
    """The run folders (names) a dry run's printed commands launch, in order: each launch's first run (the word before
    ``--run-sha256``), then the runs it goes on to (``--next-run RUN_DIR SHA256``); its comment lines left out."""
    folders = []
    for words in (line.split() for line in printed.strip().splitlines() if not line.startswith("#")):
        folders.append(words[words.index("--run-sha256") - 1])
        folders += [words[i + 1] for i, word in enumerate(words) if word == "--next-run"]
    return [Path(folder).name for folder in folders]


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


@pytest.fixture
def solo_gloo_group():
    """A torch.distributed Gloo group of this process alone, as the torch engine sees its world."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield Group(0, [0], 0, dist.group.WORLD)
    dist.destroy_process_group()


def finalize_record(run, run_dir: Path, command: list[str], exit_code: int | None, wall_s: float, **end):
    """What ``suite run`` does once a launch of ``run`` ended: the worker's record in ``run_dir``, ended (end_record)."""
    from suite.records.results import read_record
    from suite.running.run_end import RunEnd, end_record

    return end_record(read_record(run_dir), run, run_dir, RunEnd(command, exit_code, wall_s, **end))
