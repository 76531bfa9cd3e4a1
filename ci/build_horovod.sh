#!/usr/bin/env bash
# Build (once) and install Horovod 0.28.1 into the active virtual environment.
#
# Horovod's last release compiles as C++14, which torch >= 2.1 headers reject. We build the
# PyPI sdist with CMAKE_CXX_STANDARD 17 and cache the wheel, keyed by the Python tag, the
# torch version and the feature flags, so a second set-up installs it in seconds.
# Only what the suite runs is compiled: the PyTorch framework with the MPI and Gloo controllers,
# without debug information, on every core; the CPU build (no GPU operations) leaves out CUDA.
#
# Usage: ci/build_horovod.sh PYTHON      (PYTHON: the virtual environment's interpreter)
# Honoured: SUITE_WHEEL_CACHE (default ~/.cache/suite/wheels), HOROVOD_GPU_OPERATIONS
# (e.g. NCCL on a GPU cluster), CUDA_HOME.
set -euo pipefail

PYTHON=${1:?usage: ci/build_horovod.sh PYTHON}
HOROVOD_VERSION=0.28.1
HOROVOD_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
CACHE=${SUITE_WHEEL_CACHE:-$HOME/.cache/suite/wheels}
BIN=$(cd "$(dirname "$PYTHON")" && pwd)
PYTHON="$BIN/$(basename "$PYTHON")"

BUILD_ONLY=${SUITE_HOROVOD_BUILD_ONLY:-0}  # 1: build and cache the wheel, install nothing (ci/build_horovod_nccl.sh)
# Installed already with the GPU operations asked for: done. A CPU build gives way to an NCCL one, and an
# NCCL build on a machine without a GPU driver gives way to the CPU build (with a one-line notice).
installed=$("$PYTHON" -c "import horovod.torch as hvd; print('NCCL' if hvd.nccl_built() else 'none')" 2>/dev/null || echo absent)
if [ "$BUILD_ONLY" != 1 ] && [ "$installed" != absent ]; then
    if [ "$installed" = "${HOROVOD_GPU_OPERATIONS:-none}" ]; then
        echo "horovod: already installed ($installed GPU operations)"; exit 0
    elif [ "$installed" = none ] && [ "${HOROVOD_GPU_OPERATIONS:-none}" != NCCL ]; then
        echo "horovod: already installed"; exit 0
    fi
    echo "horovod: the installed build has $installed GPU operations; installing the ${HOROVOD_GPU_OPERATIONS:-CPU} build"
fi

torch_tag=$("$PYTHON" -c "import torch, sys; print(f'torch{torch.__version__.replace(\"+\", \"_\")}-py{sys.version_info[0]}{sys.version_info[1]}')")
with_mpi=0; [ -x "$BIN/mpicxx" ] || command -v mpicxx >/dev/null && with_mpi=1
gpu_ops=${HOROVOD_GPU_OPERATIONS:-none}
key="$torch_tag-mpi$with_mpi-gpu$gpu_ops"
wheel_dir="$CACHE/horovod-$HOROVOD_VERSION-$key"

if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
    echo "horovod: building $HOROVOD_VERSION for $key (once; the wheel is cached)"
    work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
    # No build isolation: pip reads the sdist's metadata with the venv's setuptools instead of installing its own first.
    "$PYTHON" -m pip download --quiet --no-deps --no-build-isolation --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
    echo "$HOROVOD_SHA256  $work/horovod-$HOROVOD_VERSION.tar.gz" | sha256sum -c --quiet
    tar xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
    src="$work/horovod-$HOROVOD_VERSION"
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    grep -q "CMAKE_CXX_STANDARD 17" "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    # Release, not setup.py's RelWithDebInfo: the same -O3 code (Horovod's CMake turns RelWithDebInfo's -O2
    # into -O3) without -g, which made the compiles of torch's headers and the link most of the build.
    sed -i "s/else 'RelWithDebInfo'/else 'Release'/" "$src/setup.py"
    grep -q "else 'Release'" "$src/setup.py"

    if [ "$gpu_ops" = none ]; then
        # The CPU build: Horovod's CMake adds CUDA whenever torch is a CUDA build and a toolkit is found
        # (its GPU host code, and its kernels compiled by nvcc for every architecture nvcc knows, for two
        # C++ ABIs: most of the build time where a toolkit is installed). Without GPU operations the suite
        # runs it on host tensors only (a GPU takes the NCCL build, ci/build_horovod_nccl.sh), so torch is
        # taken as its CPU side here, as on a machine without a toolkit.
        # Nor does its CMake look for a CUDA compiler (enabling CUDA costs CMake several nvcc test compiles).
        find_cuda='print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)'
        sed -i "s/$find_cuda/print(False)/" "$src/cmake/Modules/FindPytorch.cmake"
        sed -i 's/^check_language(CUDA)$/# CPU build: no CUDA compiler/; s/^if(NOT CMAKE_CUDA_COMPILER)$/if(FALSE)/' "$src/CMakeLists.txt"
        if grep -q "CUDA_HOME is not None" "$src/cmake/Modules/FindPytorch.cmake" || ! grep -q "^if(FALSE)$" "$src/CMakeLists.txt"; then
            echo "horovod: Horovod's CMake files are not the ones patched here; the CPU build would compile CUDA" >&2; exit 1
        fi
    # A CUDA build of torch makes Horovod's CMake look for the CUDA toolkit.
    elif [ -z "${CUDA_HOME:-}" ] && "$PYTHON" -c "import torch, sys; sys.exit(torch.version.cuda is None)"; then
        for candidate in /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")")"; do
            [ -x "$candidate/bin/nvcc" ] && export CUDA_HOME=$candidate && break
        done
    fi
    if [ -n "${CUDA_HOME:-}" ]; then
        # Name the toolkit explicitly: a wrapper nvcc elsewhere on PATH misleads CMake's search.
        export PATH="$CUDA_HOME/bin:$PATH" CUDACXX="$CUDA_HOME/bin/nvcc" CUDAToolkit_ROOT="$CUDA_HOME"
    fi
    export PATH="$BIN:$PATH"
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1
    if [ "$with_mpi" = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
    export MAKEFLAGS="-j$(nproc)"
    mkdir -p "$wheel_dir.partial"
    "$PYTHON" -m pip wheel --no-build-isolation --no-deps -w "$wheel_dir.partial" "$src"
    rm -rf "$wheel_dir"; mv "$wheel_dir.partial" "$wheel_dir"
fi
if [ "$BUILD_ONLY" = 1 ]; then
    echo "horovod: wheel cached in $wheel_dir"; exit 0
fi
"$PYTHON" -m pip install --quiet --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
# Horovod's runtime needs, pinned in ci/requirements.lock: cloudpickle, psutil, pyyaml, packaging.
"$PYTHON" -c "import horovod.torch as hvd; import horovod; print('horovod', horovod.__version__, 'mpi', hvd.mpi_built(), 'gloo', hvd.gloo_built(), 'nccl', hvd.nccl_built())"
