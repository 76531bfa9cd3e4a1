#!/usr/bin/env bash
# `make cluster-test`: build the two-node cluster (ci/cluster/cluster.sh), run tests/cluster across
# it, and tear it down again, whatever happens (a failed test, Ctrl-C, SIGTERM).
# `bash ci/cluster/run.sh projection` (`make cluster-projection`) runs ci/cluster/projection_check.py
# in the same cluster instead of the tests and writes reports/cluster/projection.md.
#
# Where it cannot run (not root, no network namespaces, Slurm/munge/sshd missing and not
# installable) it prints one line starting with SKIPPED and exits 0. Environment: SUITE_VENV
# (default .venv), CLUSTER_RATE (the link's bandwidth, default 1gbit), CLUSTER_TIMEOUT (seconds
# for the whole test run, default 1500), PYTEST_ARGS (more pytest arguments, e.g. -k mpirun).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODE=${1:-tests}
case $MODE in tests | projection) ;; *)
    echo "usage: bash ci/cluster/run.sh [tests|projection]" >&2
    exit 2
    ;;
esac
VENV=${SUITE_VENV:-.venv}
PY=$VENV/bin/python
NAME=cluster-test
[ "$MODE" = tests ] || NAME=cluster-$MODE
skip() {
    echo "SKIPPED $NAME: $*"
    exit 0
}

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, sshd, munge and Slurm daemons)"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
probe=suite-probe-$$
if ! ip netns add "$probe" 2>/dev/null; then
    skip "cannot create network namespaces here (ip netns add failed)"
fi
ip netns delete "$probe"
setup_log=$(mktemp /tmp/suite-cluster-setup.XXXXXX)
if ! bash ci/cluster/setup.sh >"$setup_log" 2>&1; then
    why=$(grep -E '^(E:|ci/cluster/setup.sh:)' "$setup_log" | tail -1)
    skip "Slurm, munge, sshd or pdsh missing and ci/cluster/setup.sh could not install them (${why:-see $setup_log}; log: $setup_log)"
fi
rm -f "$setup_log"
[ -x "$PY" ] || skip "no Python environment at $VENV (run make setup)"

STATE=$(mktemp -d /tmp/suite-cluster.XXXXXX)
tests=""
group_running() { # group_running PGID: a process of that group that is not a zombie
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '$5 == g && $3 != "Z" {found = 1} END {exit !found}'
}
stop_tests() { # the tests and everything they started (their own process group; suite run records interrupted runs)
    if [ -n "$tests" ] && group_running "$tests"; then
        kill -TERM -- "-$tests" 2>/dev/null || true
        for _ in $(seq 1 600); do
            group_running "$tests" || break
            sleep 0.1
        done
        kill -KILL -- "-$tests" 2>/dev/null || true
    fi
}
cleanup() {
    stop_tests
    bash ci/cluster/cluster.sh down "$STATE"
    rm -rf "$STATE"
    echo "$NAME: cluster torn down (namespaces, link, daemons, temporary keys)"
}
trap cleanup EXIT
trap 'echo "$NAME: interrupted"; exit 130' INT
trap 'echo "$NAME: terminated"; exit 143' TERM

start=$(date +%s)
bash ci/cluster/cluster.sh up "$STATE" "${CLUSTER_RATE:-1gbit}" || exit 1
# PYTHONPATH: this checkout's suite on every node, whatever the environment has installed.
# -s: the tests' CLUSTER lines are printed as they pass. The tests run in a process group of their
# own (setsid), in the background, so that a signal here stops them and all they started. Their
# folders are in the cluster's (--basetemp), out of reach of other pytest sessions' clean-up.
if [ "$MODE" = projection ]; then
    PYTHONPATH=$PWD setsid "$PY" ci/cluster/projection_check.py "$STATE" "${CLUSTER_REPORT:-reports/cluster/projection.md}" &
else
    SUITE_CLUSTER_STATE=$STATE PYTHONPATH=$PWD setsid "$PY" -m pytest tests/cluster -s -q -p no:cacheprovider \
        --basetemp="$STATE/tests" ${PYTEST_ARGS:-} &
fi
tests=$!
limit=${CLUSTER_TIMEOUT:-1500}
while group_running "$tests"; do
    if [ $(($(date +%s) - start)) -gt "$limit" ]; then
        echo "$NAME: timed out after $limit s"
        stop_tests
        break
    fi
    sleep 1 # a signal to this script is handled at once, not after the tests end
done
status=0
wait "$tests" || status=$?
echo "$NAME: exit $status after $(($(date +%s) - start)) s"
exit $status
