"""Shared fixtures: an isolated cache, and running small scenarios through the real `suite run`."""

from __future__ import annotations

import json
import os
import socket
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
