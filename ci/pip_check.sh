#!/usr/bin/env bash
# The README's pip route, checked (`make pip-check`; .ci/run runs it after the tests): a fresh virtual environment,
# `pip install ".[mpi,logs,fid]"` from this checkout, then, from outside the checkout, the `suite` command, the
# built-in scenarios (`suite scenarios`, shipped in the package) and a user's first run, `suite run quickstart` by
# name with `suite report` (docs/quickstart.md), a tiny torch-engine run on the embedded digits at 1 and 2 processes
# with its logs and report, and a horovod entry refused in one line where Horovod is not installed (it is optional).
#
# The install goes through uv (ci/setup.sh installs it into .venv), which reads no pip configuration: torch
# comes from PyPI, as a user's plain `pip install` gets it, not from a machine-local CPU wheel that PyPI's
# torchvision cannot load. The versions are held to ci/requirements.lock (`-c`), the tested set, so that the check
# does not change with each upstream release and uv's cache serves the wheels; PIP_CHECK_UNPINNED=1 resolves the
# newest versions pyproject.toml's ranges allow instead, as a user's install does.
# Environment: PYTHON (default python3), UV (default .venv/bin/uv, else uv on PATH), PIP_CHECK_KEEP=1 keeps the
# work folder.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
PYTHON=${PYTHON:-python3}
UV=${UV:-$([ -x .venv/bin/uv ] && echo "$repo/.venv/bin/uv" || command -v uv || true)}
if [ -z "$UV" ]; then
    echo "pip-check: uv not found (make setup installs it into .venv, or set UV)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/suite-pip-check.XXXXXX")
if [ "${PIP_CHECK_KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi
venv="$work/venv"
pins=(-c "$repo/ci/requirements.lock")
[ "${PIP_CHECK_UNPINNED:-0}" = 1 ] && pins=()

echo "pip-check: fresh venv in $venv"
"$PYTHON" -m venv "$venv"
# A copy of the checkout's tracked and untracked-but-not-ignored files: the build writes build/ and *.egg-info
# beside the sources, which stay out of the working tree this way.
mkdir "$work/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar -C "$repo" --null -T - -cf - | tar -C "$work/src" -xf -
echo "pip-check: pip install \".[mpi,logs,fid]\" (uv, PyPI's torch${pins:+, versions of ci/requirements.lock})"
(cd "$work/src" && "$UV" pip install --quiet --python "$venv/bin/python" "${pins[@]}" ".[mpi,logs,fid]")

cd "$work"  # nothing of the checkout on sys.path: the installed package only
"$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import pathlib

import suite

where = pathlib.Path(suite.__file__).resolve()
assert "site-packages" in where.parts, f"suite imported from {where}, not the installed package"
for extra in ("horovod", "deepspeed"):  # optional: not in the extras this route installs
    try:
        md.version(extra)
    except md.PackageNotFoundError:
        continue
    print(f"pip-check: note: {extra} is installed in the fresh venv")
print(f"pip-check: suite {md.version('gan-scaling-suite')} from {where.parent}")
EOF
"$venv/bin/suite" --version
"$venv/bin/suite" env >"$work/env.json"

# The built-in scenarios come with the package: listed, and the quickstart found by its name and reported, here,
# where no scenarios/ folder is beside the working directory.
"$venv/bin/suite" scenarios >"$work/scenarios.txt"
for name in quickstart smoke digits engines; do
    if ! grep -q "^$name " "$work/scenarios.txt"; then
        echo "pip-check: suite scenarios does not list $name:" >&2
        cat "$work/scenarios.txt" >&2
        exit 1
    fi
done
"$venv/bin/suite" run quickstart --quiet --out "$work/quickstart"
"$venv/bin/suite" report "$work/quickstart" >/dev/null
test -s "$work/quickstart/report/report.md"
echo "pip-check: suite run quickstart and its report, from the installed package's scenario"

cat >"$work/tiny.yaml" <<'EOF'
name: pip-check
description: The pip route's check, a few steps of the data-parallel DC-GAN on the torch engine.
dataset: {name: digits, image_size: 20}
train: {epochs: 1, steps: 3, batch_size: 32, warmup_steps: 1, threads: 1}
metrics: {features: classifier, samples: 100, curve_points: 1}
runs:
  - {strategy: data_parallel, engine: torch, procs: [1, 2]}
EOF
"$venv/bin/suite" run "$work/tiny.yaml" --out "$work/results" --mllog --tensorboard "$work/tensorboard"  # the logs extra
ls "$work"/tensorboard/*/events.out.tfevents.* >/dev/null
ls "$work"/results/*/mllog.txt >/dev/null
"$venv/bin/suite" report "$work/results" >/dev/null
test -s "$work/results/report/report.md"

# Horovod is optional: where it is not installed, a scenario that asks for it is refused in one line, exit 2.
if ! "$venv/bin/python" -c "import horovod" 2>/dev/null; then
    sed 's/engine: torch/engine: horovod/' "$work/tiny.yaml" >"$work/horovod.yaml"
    set +e
    "$venv/bin/suite" run "$work/horovod.yaml" --out "$work/horovod" 2>"$work/horovod.err"
    code=$?
    set -e
    lines=$(wc -l <"$work/horovod.err")
    if [ "$code" != 2 ] || [ "$lines" != 1 ] || ! grep -qi horovod "$work/horovod.err"; then
        echo "pip-check: a horovod entry without Horovod ended with code $code and $lines lines:" >&2
        cat "$work/horovod.err" >&2
        exit 1
    fi
    echo "pip-check: without Horovod, a horovod entry is refused: $(cat "$work/horovod.err")"
fi
echo "pip-check: OK (the pip route installs a working suite; torch engine run and report in $work)"
