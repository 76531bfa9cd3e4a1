"""ci/setup.sh, the README commands' set-up: a disk that cannot hold a fresh environment is refused in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs (mounting needs root; skipped elsewhere), unmounted after the test."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_fresh_set_up_on_a_disk_too_small_is_refused_in_one_line_before_anything_is_written(small_disk, tmp_path):
    env = {**os.environ, "SUITE_VENV": str(small_disk / "venv"), "UV_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(["bash", "ci/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"ci/setup.sh: {small_disk} has 0 GB free; a fresh set-up needs about 7 GB there")
    assert "SUITE_VENV and UV_CACHE_DIR" in line
    assert list(small_disk.iterdir()) == []  # no environment begun


def test_the_cache_disk_is_checked_too(small_disk, tmp_path):
    """The environment's disk may be large while uv's cache (HOME's, or UV_CACHE_DIR) is on a small one."""
    if shutil.disk_usage(tmp_path).free < 8 * 1024**3:
        pytest.skip("the environment's own disk is too small here to isolate the cache's check")
    env = {**os.environ, "SUITE_VENV": str(tmp_path / "venv"), "UV_CACHE_DIR": str(small_disk / "uv")}
    done = subprocess.run(["bash", "ci/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert (
        done.returncode == 1
        and done.stderr.startswith(f"ci/setup.sh: {small_disk} has 0 GB free")
        and not (tmp_path / "venv").exists()
    )


def test_a_warm_uv_cache_is_not_refused_for_the_space_a_cold_one_needs(small_disk):
    """With torch already unpacked in uv's cache, uv links the environment's files from it: no 7 GB check (here the
    set-up then fails later, on the 16 MB disk, in its own words)."""
    (small_disk / "uv" / "archive-v0" / "a1" / "torch").mkdir(parents=True)
    env = {**os.environ, "SUITE_VENV": str(small_disk / "venv"), "UV_CACHE_DIR": str(small_disk / "uv")}
    done = subprocess.run(["bash", "ci/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert "GB free; a fresh set-up needs" not in done.stderr
    assert "setting up" in done.stdout
