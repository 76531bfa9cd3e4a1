#!/usr/bin/env bash
# Build (once) Horovod 0.28.1 with NCCL for GPUs, on a machine with no GPU and no CUDA toolkit.
#
# The CUDA compiler, headers and libraries come from PyPI: nvidia-cuda-nvcc, nvidia-cuda-crt,
# nvidia-nvvm and nvidia-cuda-cccl (downloaded into the wheel cache, never into the venv) and the
# nvidia-* wheels torch already installed (the CUDA runtime, NCCL). They are joined by symbolic
# links into one CUDA_HOME (bin, include, lib64, nvvm), and ci/build_horovod.sh builds against it
# with HOROVOD_GPU_OPERATIONS=NCCL. The wheel is cached beside the CPU one (key ...-gpuNCCL).
#
# Usage: ci/build_horovod_nccl.sh PYTHON [--install]
#   without --install: build and cache the wheel only (the venv keeps the CPU build);
#   with --install: install it (ci/setup.sh does so where nvidia-smi works).
# Honoured: SUITE_WHEEL_CACHE (default ~/.cache/suite/wheels), CUDA_NVCC_VERSION (default 13.0.88).
set -euo pipefail

PYTHON=${1:?usage: ci/build_horovod_nccl.sh PYTHON [--install]}
INSTALL=${2:-}
CACHE=${SUITE_WHEEL_CACHE:-$HOME/.cache/suite/wheels}
NVCC_VERSION=${CUDA_NVCC_VERSION:-13.0.88}
BIN=$(cd "$(dirname "$PYTHON")" && pwd)
PYTHON="$BIN/$(basename "$PYTHON")"
site=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cuda_major=$("$PYTHON" -c "import torch; print((torch.version.cuda or '').split('.')[0])")
[ -n "$cuda_major" ] || { echo "horovod-nccl: this torch has no CUDA build; nothing to build against" >&2; exit 1; }

# A wheel built before (here, or carried to a machine without a package registry): install it without the compiler.
torch_tag=$("$PYTHON" -c "import torch, sys; print(f'torch{torch.__version__.replace(\"+\", \"_\")}-py{sys.version_info[0]}{sys.version_info[1]}')")
# (the key is build_horovod.sh's: its pinned version, this torch and Python, MPI or not, NCCL)
horovod_version=$(sed -n 's/^HOROVOD_VERSION=//p' "$(dirname "$0")/build_horovod.sh")
with_mpi=0; [ -x "$BIN/mpicxx" ] || command -v mpicxx >/dev/null && with_mpi=1
if ls "$CACHE/horovod-$horovod_version-$torch_tag-mpi$with_mpi-gpuNCCL"/horovod-*.whl >/dev/null 2>&1; then
    echo "horovod-nccl: a wheel for $torch_tag is cached in $CACHE; no compiler needed"
    export HOROVOD_GPU_OPERATIONS=NCCL SUITE_HOROVOD_BUILD_ONLY=$([ "$INSTALL" = "--install" ] && echo 0 || echo 1)
    exec bash "$(dirname "$0")/build_horovod.sh" "$PYTHON"
fi

toolkit="$CACHE/cuda-toolkit-$NVCC_VERSION"
if [ ! -x "$toolkit/pkgs/nvidia/cu$cuda_major/bin/nvcc" ]; then
    echo "horovod-nccl: fetching the CUDA $NVCC_VERSION compiler from PyPI into $toolkit"
    rm -rf "$toolkit.partial"; mkdir -p "$toolkit.partial"
    minor=${NVCC_VERSION%.*}
    "$PYTHON" -m pip install --quiet --no-deps --target "$toolkit.partial/pkgs" \
        "nvidia-cuda-nvcc==$NVCC_VERSION" "nvidia-cuda-crt==$NVCC_VERSION" "nvidia-nvvm==$NVCC_VERSION" \
        "nvidia-cuda-cccl==$minor.*"
    rm -rf "$toolkit"; mv "$toolkit.partial" "$toolkit"
fi

# One CUDA_HOME: the compiler's own tree (nvcc finds its headers and nvvm beside its real path, so links
# to nvcc would not do), with links to torch's runtime and NCCL added for the names it lacks (rebuilt each
# time: they point into this venv).
home="$toolkit/pkgs/nvidia/cu$cuda_major"
mkdir -p "$home/include" "$home/lib"
find "$home/include" "$home/lib" -maxdepth 1 -type l -delete
for root in "$site/nvidia/cu$cuda_major" "$site/nvidia/nccl"; do
    [ -d "$root" ] || continue
    for entry in "$root"/include/*; do [ -e "$home/include/$(basename "$entry")" ] || ln -s "$entry" "$home/include/"; done
    for entry in "$root"/lib/*; do [ -e "$home/lib/$(basename "$entry")" ] || ln -s "$entry" "$home/lib/"; done
done
[ -e "$home/lib64" ] || ln -s lib "$home/lib64"
# Linkers look for the unversioned names that the runtime wheels leave out.
for versioned in "$home"/lib/lib*.so.*; do
    plain="${versioned%%.so.*}.so"
    [ -e "$plain" ] || ln -s "$(basename "$versioned")" "$plain"
done
[ -x "$home/bin/nvcc" ] || { echo "horovod-nccl: no nvcc under $home/bin" >&2; exit 1; }
"$home/bin/nvcc" --version | tail -1

export CUDA_HOME="$home" HOROVOD_GPU_OPERATIONS=NCCL
export HOROVOD_NCCL_INCLUDE="$home/include" HOROVOD_NCCL_LIB="$home/lib64" HOROVOD_NCCL_LINK=SHARED
# Horovod's CMake compiles its few CUDA kernels for these: A100 (80) and H100 (90); nvcc 13 has no target older than 75.
export HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-80,90}
export SUITE_HOROVOD_BUILD_ONLY=$([ "$INSTALL" = "--install" ] && echo 0 || echo 1)
exec bash "$(dirname "$0")/build_horovod.sh" "$PYTHON"
