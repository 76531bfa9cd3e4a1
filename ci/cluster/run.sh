#!/usr/bin/env bash
# `make cluster-test`: fetch the nodes' packages (ci/cluster/setup.sh), build the two-node cluster
# (ci/cluster/cluster.sh), run tests/cluster across it, and tear it all down again, whatever
# happens (a failed test, Ctrl-C, SIGTERM), leaving this machine as it found it.
# `bash ci/cluster/run.sh projection` (`make cluster-projection`) runs ci/cluster/projection_check.py
# in the same cluster instead of the tests and writes reports/cluster/projection.md.
# `bash ci/cluster/run.sh down` tears down what a run killed before its own teardown (SIGKILL, a
# crash, a reboot) left; a run that finds such leftovers tears them down first itself.
#
# All the run's state is in one folder, CLUSTER_STATE_DIR (default /var/tmp/suite-cluster), made
# before anything else is changed: its owner (this script's pid), the packages fetched for the
# nodes, the cluster's folder (what it made outside it is recorded there before it is made). Every
# process the run starts carries SUITE_CLUSTER_TEST_DIR=<that folder> in its environment, so
# that `down` finds them without any pid surviving.
#
# Where it cannot run (not root, no network namespaces, Slurm/munge/sshd missing and not
# fetchable) it prints one line starting with SKIPPED and exits 0. Environment: SUITE_VENV
# (default .venv), CLUSTER_RATE (the link's bandwidth, default 1gbit), CLUSTER_TIMEOUT (seconds
# for the whole test run, default 1500), PYTEST_ARGS (more pytest arguments, e.g. -k mpirun).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODE=${1:-tests}
case $MODE in tests | projection | down) ;; *)
    echo "usage: bash ci/cluster/run.sh [tests|projection|down]" >&2
    exit 2
    ;;
esac
VENV=${SUITE_VENV:-.venv}
PY=$VENV/bin/python
DIR=${CLUSTER_STATE_DIR:-/var/tmp/suite-cluster}
NAME=cluster-test
[ "$MODE" = tests ] || NAME=cluster-$MODE
skip() {
    echo "SKIPPED $NAME: $*"
    exit 0
}

owner_alive() { # the run that owns DIR is still running (its pid, with the same start time)
    local pid start
    read -r pid start <"$DIR/owner" 2>/dev/null || return 1
    [ -n "$pid" ] && [ "$(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null)" = "$start" ]
}

marked() { # the processes started for this run: their environment names its folder
    grep -lzxF "SUITE_CLUSTER_TEST_DIR=$DIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vxF "$$"
}

still_marked() { # still_marked PID: running, and one of the run's (a zombie's environment is empty)
    grep -qzxF "SUITE_CLUSTER_TEST_DIR=$DIR" "/proc/$1/environ" 2>/dev/null
}

stop_marked() { # stop_marked [PID...]: TERM the run's processes but those named, KILL what is left after 10 s
    local round pid pids left
    for round in 1 2 3; do # again, for what they started meanwhile
        mapfile -t pids < <(marked | grep -vxF -f <(printf '%s\n' 0 "$@"))
        [ ${#pids[@]} -eq 0 ] && return 0
        kill -TERM "${pids[@]}" 2>/dev/null
        for _ in $(seq 1 100); do
            left=0
            for pid in "${pids[@]}"; do if still_marked "$pid"; then left=1; fi; done
            [ "$left" -eq 0 ] && break
            sleep 0.1
        done
        for pid in "${pids[@]}"; do if still_marked "$pid"; then kill -KILL "$pid" 2>/dev/null; fi; done
    done
}

teardown() { # everything the run made: its processes, the cluster (namespaces, link, daemons), DIR
    [ -d "$DIR" ] || return 0
    export -n SUITE_CLUSTER_TEST_DIR # what the teardown starts is not the run's
    # first what is not a daemon of the cluster (the set-up, an `up` still running, the tests);
    # cluster.sh down then stops the daemons in order and all left in the nodes
    stop_marked $(cat "$DIR"/cluster/pids/* 2>/dev/null)
    if [ -d "$DIR/cluster" ]; then bash ci/cluster/cluster.sh down "$DIR/cluster"; fi
    stop_marked
    rm -rf "$DIR"
}

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, sshd, munge and Slurm daemons)"

if [ "$MODE" = down ]; then
    if [ ! -e "$DIR" ]; then
        echo "$NAME: nothing to tear down ($DIR does not exist)"
        exit 0
    fi
    if owner_alive; then
        echo "$NAME: the cluster test that owns $DIR is still running (pid $(cut -d' ' -f1 "$DIR/owner")); stop it and it tears down itself" >&2
        exit 1
    fi
    teardown
    echo "$NAME: removed what the cluster test left: its processes, namespaces, link, daemons' files and packages ($DIR)"
    exit 0
fi

command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
unshare --net true 2>/dev/null || skip "cannot create network namespaces here (unshare --net failed)"
if [ -e "$DIR" ]; then
    if owner_alive; then
        echo "$NAME: another cluster test is running here (pid $(cut -d' ' -f1 "$DIR/owner"); its state in $DIR)" >&2
        exit 1
    fi
    echo "$NAME: an earlier cluster test ended before its teardown; removing what it left ($DIR)"
    teardown
fi

# The run's folder and its owner, before anything else is changed.
mkdir -p "$DIR"
echo "$$ $(awk '{print $22}' /proc/$$/stat)" >"$DIR/owner"
export SUITE_CLUSTER_TEST_DIR=$DIR
STATE=$DIR/cluster
tests=""
cluster_made=0
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
    teardown
    if [ "$cluster_made" -eq 1 ]; then
        echo "$NAME: cluster torn down (namespaces, link, daemons, temporary keys, fetched packages, $DIR)"
    fi
}
trap cleanup EXIT
trap 'echo "$NAME: interrupted"; exit 130' INT
trap 'echo "$NAME: terminated"; exit 143' TERM

if ! bash ci/cluster/setup.sh "$DIR" >"$DIR/setup.log" 2>&1; then
    log=$(mktemp -t suite-cluster-setup.XXXXXX) # kept (in TMPDIR, default /tmp): the line names it
    cp "$DIR/setup.log" "$log"
    why=$(grep -E '^(E:|ci/cluster/setup.sh:)' "$log" | tail -1)
    skip "Slurm, munge, sshd or pdsh missing and ci/cluster/setup.sh could not fetch them (${why:-see $log}; log: $log)"
fi
[ -x "$PY" ] || skip "no Python environment at $VENV (run make setup)"

start=$(date +%s)
mkdir "$STATE"
cluster_made=1
pkgroot=""
[ -s "$DIR/packages" ] && pkgroot=$DIR/root
CLUSTER_PKGROOT=$pkgroot bash ci/cluster/cluster.sh up "$STATE" "${CLUSTER_RATE:-1gbit}" || exit 1
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
