#!/usr/bin/env bash
# Regression benchmark for CI runners (small GPUs or CPUs): measure tests/benchmarks and compare
# with the baseline stored for this kind of machine in baselines/benchmarks/<machine>/.
#
# Fails when a benchmark's mean is more than SUITE_REGRESSION_TOLERANCE percent (default 25)
# slower than the baseline. Without a baseline for this machine it records one and says so:
# commit baselines/benchmarks/<machine>/ to turn the comparison on.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh

machine=${SUITE_MACHINE:-$(.venv/bin/python - <<'PY'
import os, re, torch
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu-{os.cpu_count()}cores"
print(re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower())
PY
)}
storage="baselines/benchmarks/$machine"
tolerance=${SUITE_REGRESSION_TOLERANCE:-25}
mkdir -p results
args=(tests/benchmarks --benchmark-enable --benchmark-only --benchmark-storage="file://$storage"
      --benchmark-json="results/benchmarks-$machine.json" -p no:cacheprovider)

if compgen -G "$storage/*/*.json" > /dev/null; then
    echo "comparing with the baseline in $storage (fail above +$tolerance% mean)"
    .venv/bin/python -m pytest "${args[@]}" --benchmark-compare --benchmark-compare-fail="mean:$tolerance%"
else
    .venv/bin/python -m pytest "${args[@]}" --benchmark-save=baseline
    echo "no baseline for '$machine' yet: recorded one in $storage; commit it to compare future runs against it"
fi
