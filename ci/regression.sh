#!/usr/bin/env bash
# The CI regression gate: `suite gate`, this checkout against a baseline revision, both run on this
# host alternately (A B B A ...), and a paired test of the per-pair ratios. See
# docs/benchmarks-and-ci.md#the-regression-gate-suite-gate.
#
#   bash ci/regression.sh                       baseline: the merge base of HEAD with the main branch
#   bash ci/regression.sh --baseline v1.2       any revision; other `suite gate` options pass through
#
# Exit codes: 0 PASS, 1 FAIL, 5 INCONCLUSIVE (too noisy to tell), 2 bad input or a side whose
# workload failed. The report is results/gate/gate.md. Environment: SUITE_VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SUITE_VENV:-.venv}
SUITE_VENV=$venv bash ci/setup.sh >&2
exec "$venv/bin/suite" gate "$@"
