#!/usr/bin/env bash
# Regression gate for CI runners (small GPUs or CPUs): run scenarios/regression.yaml and compare it,
# with `suite compare`, against the baseline of this kind of machine,
# baselines/regression/<machine>/records.json. Fails (exit 1) on a regression beyond its tolerance
# and the noise of both measurements, or when a run fails; exit 2 when the results cannot be compared.
#
#   bash ci/regression.sh             run the scenario and compare it with this machine's baseline
#   bash ci/regression.sh --record    run the scenario and (re)write this machine's baseline; commit it
#   bash ci/regression.sh --machine   print this machine's kind (the baseline folder's name)
#
# The machine kind is the GPU's name (`nvidia-h100-80gb-hbm3`) or `cpu-<N>cores`. Environment:
# SUITE_MACHINE (override the kind), SUITE_BASELINES (folder of baselines, default
# baselines/regression; the GPU workflow points it at its cache), SUITE_COMPARE_ARGS (more
# `suite compare` options, e.g. "--tolerance images_per_s=15"), SUITE_VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-compare}
case "$mode" in
    compare|--record|--machine) ;;
    *) echo "usage: bash ci/regression.sh [--record | --machine]" >&2; exit 2 ;;
esac
venv=${SUITE_VENV:-.venv}
SUITE_VENV=$venv bash ci/setup.sh >&2

machine=${SUITE_MACHINE:-$("$venv/bin/python" - <<'PY'
import os, re, torch
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu-{os.cpu_count()}cores"
print(re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower())
PY
)}
if [ "$mode" = --machine ]; then
    echo "$machine"
    exit 0
fi
baseline=${SUITE_BASELINES:-baselines/regression}/$machine
results=results/regression

rm -rf "$results"  # a fresh run: nothing left over from an earlier scenario
"$venv/bin/suite" run scenarios/regression.yaml --out "$results" -q

if [ "$mode" = --record ]; then
    "$venv/bin/suite" report "$results" >/dev/null  # writes the records as one JSON list: $results/report/records.json
    mkdir -p "$baseline"
    cp "$results/report/records.json" "$baseline/records.json"
    cp scenarios/regression.yaml "$baseline/scenario.yaml"
    echo "recorded the baseline of '$machine' in $baseline (report: $results/report/report.md); commit it"
elif [ -f "$baseline/records.json" ]; then
    echo "comparing with the baseline of '$machine' in $baseline" >&2
    # shellcheck disable=SC2086  # SUITE_COMPARE_ARGS holds several options
    "$venv/bin/suite" compare "$results" "$baseline" ${SUITE_COMPARE_ARGS:-} | tee "$results/compare.md"
else
    echo "no regression baseline for '$machine' in ${SUITE_BASELINES:-baselines/regression}: the scenario ran, nothing" \
         "was compared. Record one on a quiet machine of this kind with 'bash ci/regression.sh --record' and commit $baseline/."
fi
