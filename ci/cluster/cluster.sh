#!/usr/bin/env bash
# A two-node cluster on this machine, for `make cluster-test` (root only).
#
#   cluster.sh up STATE [RATE]     build it; STATE is a new, empty folder for its files
#   cluster.sh down STATE          remove everything `up` made (safe to repeat, and after a failed `up`)
#   cluster.sh on STATE NODE CMD   run CMD on node1 or node2 (its network, hostname and /etc/hosts)
#   cluster.sh shape STATE RATE    the link's bandwidth, both ways (tc tbf; e.g. 1gbit, 100mbit)
#
# Each node is a network namespace (suite-node1, suite-node2) joined to the other by a veth
# pair (eth1 on both sides, 10.77.0.1 and 10.77.0.2, shaped with tc tbf), plus a holder
# process that keeps the node's own UTS namespace (hostname node1, node2) and mount namespace
# (its /etc/hosts naming both nodes, and node3, 10.77.0.3, a node that is down; STATE/run bound
# to STATE/NODE: munge's socket and slurmd's spool are per node, as on separate machines; the
# packages ci/cluster/setup.sh fetched, when CLUSTER_PKGROOT names them, laid over /usr by
# ci/cluster/layers.sh; an /etc/passwd with sshd's privilege-separation user where this machine
# has none). Everything else, the file system included, is shared, as on a cluster with a shared
# home. On each node run sshd (a temporary host key, root's login by a temporary key pair; clients
# use STATE/bin/ssh, which reads STATE/ssh/config), munged (a temporary key) and slurmd; node1
# also runs slurmctld. Every daemon is started in the foreground, in the background of this
# script, and its pid kept in STATE/pids. What `up` changes outside STATE (a namespace, the veth
# pair, /run/sshd when absent) is written to STATE before it is made, so that `down` undoes it
# even after `up` was killed: `down` stops the daemons by pid (a pid only while it is still in a
# node's namespace), then every process left in the nodes' namespaces, then removes the
# namespaces, the veth pair and /run/sshd. Nothing else outside STATE is changed.
set -euo pipefail

NODES=(node1 node2)
SUBNET=10.77.0
NETNS_PREFIX=suite-
HERE=$(cd "$(dirname "$0")" && pwd)

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

addr() { echo "$SUBNET.${1#node}"; }

holder_pid() { cat "$STATE/pids/$1.holder"; }

on() { # on NODE CMD...: run CMD in NODE's network, UTS and mount namespaces, in this folder
    local node=$1
    shift
    nsenter -t "$(holder_pid "$node")" -n -u -m --wd="$PWD" -- "$@"
}

start() { # start NAME NODE CMD...: a daemon in the foreground, in the background here; pid kept
    local name=$1 node=$2
    shift 2
    # nsenter execs the daemon (no new PID namespace): $! is the daemon's own pid
    nsenter -t "$(holder_pid "$node")" -n -u -m --wd="$PWD" -- "$@" </dev/null >"$STATE/logs/$name.out" 2>&1 &
    echo $! >"$STATE/pids/$name"
}

log_tails() { # the last lines of each daemon's log, before the teardown removes them
    local log
    for log in "$STATE"/logs/*.out; do
        [ -s "$log" ] || continue
        echo "--- last lines of ${log##*/}:" >&2
        tail -n 5 "$log" >&2
    done
}

wait_for() { # wait_for SECONDS WHAT CMD...: until CMD succeeds
    local limit=$1 what=$2
    shift 2
    local i
    for ((i = 0; i < limit * 5; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    die "$what not ready after ${limit} s (the daemons' logs follow)"
}

shape() {
    local rate=$1 node
    for node in "${NODES[@]}"; do
        ip netns exec "$NETNS_PREFIX$node" tc qdisc replace dev eth1 root tbf rate "$rate" burst 256kb latency 50ms
    done
    echo "$rate" >"$STATE/rate"
}

write_configs() {
    local ssh=$STATE/ssh node
    mkdir -p "$ssh" "$STATE/bin" "$STATE/run" "$STATE/ctld"
    cat >"$ssh/sshd_config" <<EOF
Port 22
HostKey $ssh/host_key
AuthorizedKeysFile $ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
EOF
    {
        for node in "${NODES[@]}"; do printf 'Host %s\n  HostName %s\n' "$node" "$(addr "$node")"; done
        cat <<EOF
Host *
  User root
  IdentityFile $ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $ssh/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
EOF
    } >"$ssh/config"
    # The site's ssh configuration, as ~/.ssh/config would give it: launchers find `ssh` on PATH.
    printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$ssh/config" >"$STATE/bin/ssh"
    chmod 755 "$STATE/bin/ssh"

    for node in "${NODES[@]}"; do
        mkdir -p "$STATE/$node/slurmd"
        {
            echo "127.0.0.1 localhost"
            for n in "${NODES[@]}"; do echo "$(addr "$n") $n"; done
            echo "$SUBNET.3 node3  # no such machine: a node that is down, for the bad-input tests"
        } >"$STATE/$node/hosts"
    done
    # sshd refuses to start without its privilege-separation user: the nodes get one where this machine has none
    if ! getent passwd sshd >/dev/null; then
        local uid=100
        while getent passwd "$uid" >/dev/null; do uid=$((uid + 1)); done
        { cat /etc/passwd; echo "sshd:x:$uid:65534::/run/sshd:/usr/sbin/nologin"; } >"$STATE/passwd"
    fi
    local cpus mem
    # The nodes are declared as large as a GPU site's (128 CPUs, 8 GPUs, feature gpu), with a partition
    # batch besides the default debug (Frontier's), so that sbatch --test-only can judge each site
    # preset's job script (tests/cluster: test_site_presets_pass_sbatch);
    # config_overrides keeps slurmd from draining a node that has fewer. Slurm drops a GPU without a
    # device file, so the GPUs are device files nothing opens, in STATE (a plain file where mknod fails).
    cpus=$(($(nproc) > 128 ? $(nproc) : 128))
    mkdir -p "$STATE/gpus"
    local i
    for i in 0 1 2 3 4 5 6 7; do mknod "$STATE/gpus/gpu$i" c 195 "$i" 2>/dev/null || : >"$STATE/gpus/gpu$i"; done
    echo "NodeName=node[1-2] Name=gpu File=$STATE/gpus/gpu[0-7]" >"$STATE/gres.conf"
    mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 4))
    cat >"$STATE/slurm.conf" <<EOF
# slurm.conf of the test cluster ci/cluster/cluster.sh builds; per-node paths under $STATE/run
ClusterName=suitetest
SlurmctldHost=node1($(addr node1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/run/munge.socket
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/ctld
SlurmctldPidFile=$STATE/ctld/slurmctld.pid
SlurmctldLogFile=$STATE/ctld/slurmctld.log
SlurmdSpoolDir=$STATE/run/slurmd
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmdLogFile=$STATE/run/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=20
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=node1 NodeAddr=$(addr node1) CPUs=$cpus RealMemory=$mem Gres=gpu:8 Feature=gpu State=UNKNOWN
NodeName=node2 NodeAddr=$(addr node2) CPUs=$cpus RealMemory=$mem Gres=gpu:8 Feature=gpu State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName=batch Nodes=node1,node2 Default=NO MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

make_keys() { # the temporary keys, made on node1 (its ssh-keygen and mungekey may be the fetched packages')
    local ssh=$STATE/ssh node known=""
    on node1 ssh-keygen -q -t ed25519 -N '' -C suite-cluster-host -f "$ssh/host_key"
    on node1 ssh-keygen -q -t ed25519 -N '' -C suite-cluster-user -f "$ssh/id_ed25519"
    cp "$ssh/id_ed25519.pub" "$ssh/authorized_keys"
    for node in "${NODES[@]}"; do known+="$node,$(addr "$node"),"; done
    echo "${known%,} $(cut -d' ' -f1,2 "$ssh/host_key.pub")" >"$ssh/known_hosts"
    on node1 mungekey --create --bits 1024 --keyfile "$STATE/munge.key" >/dev/null 2>&1 ||
        dd if=/dev/urandom of="$STATE/munge.key" bs=128 count=1 status=none
    chmod 600 "$STATE/munge.key"
}

up() {
    [ "$(id -u)" -eq 0 ] || die "needs root"
    [ -d "$STATE" ] || die "$STATE: no such folder"
    [ -z "$(ls -A "$STATE")" ] || die "$STATE is not empty"
    local node
    for node in "${NODES[@]}"; do
        ! ip netns list | grep -qw "$NETNS_PREFIX$node" || die "network namespace $NETNS_PREFIX$node exists already (another cluster test, or one not torn down: ip netns delete $NETNS_PREFIX$node)"
    done
    mkdir -p "$STATE/pids" "$STATE/logs"
    write_configs
    # each change outside STATE is recorded before it is made
    if [ ! -d /run/sshd ]; then
        touch "$STATE/made-run-sshd"
        mkdir -p /run/sshd
        chmod 755 /run/sshd
    fi

    # the nodes and the link
    for node in "${NODES[@]}"; do
        echo "$NETNS_PREFIX$node" >>"$STATE/netns"
        ip netns add "$NETNS_PREFIX$node"
    done
    echo suite-veth1 >"$STATE/veth"
    ip link add suite-veth1 type veth peer name suite-veth2
    for node in "${NODES[@]}"; do
        local ns=$NETNS_PREFIX$node
        ip link set "suite-veth${node#node}" netns "$ns"
        ip -n "$ns" link set "suite-veth${node#node}" name eth1
        ip -n "$ns" addr add "$(addr "$node")/24" dev eth1
        ip -n "$ns" link set eth1 up
        ip -n "$ns" link set lo up
        # the holder of the node's hostname and mounts
        # (not `ip netns exec`, which mounts a sysfs of its own, without the cgroup mounts slurmd needs)
        unshare --uts --mount --propagation private nsenter --net="/run/netns/$ns" sleep infinity </dev/null >/dev/null 2>&1 &
        echo $! >"$STATE/pids/$node.holder"
    done
    shape "${RATE:-1gbit}"
    for node in "${NODES[@]}"; do
        local pid
        pid=$(holder_pid "$node")
        wait_for 5 "$node's namespaces" test "$(readlink "/proc/$pid/ns/uts")" != "$(readlink /proc/self/ns/uts)"
        nsenter -t "$pid" -u hostname "$node"
        nsenter -t "$pid" -m mount --bind "$STATE/$node/hosts" /etc/hosts
        nsenter -t "$pid" -m mount --bind "$STATE/$node" "$STATE/run"
        if [ -f "$STATE/passwd" ]; then nsenter -t "$pid" -m mount --bind "$STATE/passwd" /etc/passwd; fi
        if [ -n "${CLUSTER_PKGROOT:-}" ]; then nsenter -t "$pid" -m bash "$HERE/layers.sh" "$CLUSTER_PKGROOT"; fi
    done
    make_keys

    # sshd, munged, slurmd on each node; slurmctld on node1
    for node in "${NODES[@]}"; do
        start "$node.sshd" "$node" /usr/sbin/sshd -D -e -f "$STATE/ssh/sshd_config" -o "ListenAddress=$(addr "$node")" \
            -o "PidFile=$STATE/run/sshd.pid"
        start "$node.munged" "$node" munged --foreground --force --key-file="$STATE/munge.key" \
            --socket="$STATE/run/munge.socket" --pid-file="$STATE/run/munged.pid" \
            --log-file="$STATE/run/munged.log" --seed-file="$STATE/run/munged.seed"
    done
    for node in "${NODES[@]}"; do
        wait_for 10 "sshd on $node" on node1 "$STATE/bin/ssh" "$node" true
        wait_for 10 "munged on $node" test -S "$STATE/$node/munge.socket"
    done
    start node1.slurmctld node1 slurmctld -D -i -f "$STATE/slurm.conf"
    for node in "${NODES[@]}"; do
        start "$node.slurmd" "$node" slurmd -D -N "$node" -f "$STATE/slurm.conf"
    done
    wait_for 60 "slurm (both nodes idle)" nodes_idle
    echo "cluster up: node1 $(addr node1), node2 $(addr node2), link $(cat "$STATE/rate"); state in $STATE"
}

nodes_idle() {
    local out
    out=$(on node1 env SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -o '%N %t' | sort -u) # a node once, whatever its partitions
    [ "$(echo "$out" | grep -c ' idle$')" -eq ${#NODES[@]} ]
}

running() { # running PID: alive and not a zombie (an orphan waits for init to reap it)
    kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

ours() { # ours PID: the process is in one of the nodes' network namespaces (so a pid reused since is left alone)
    local ns
    ns=$(ip netns identify "$1" 2>/dev/null) || return 1
    [ -n "$ns" ] && [ -f "$STATE/netns" ] && grep -qxF "$ns" "$STATE/netns"
}

stop_pids() { # stop_pids PID...: TERM them, KILL them after 10 s, wait until init reaped them
    local pid i left
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 100; i++)); do
        left=0
        for pid in "$@"; do if running "$pid"; then left=1; fi; done
        [ "$left" -eq 0 ] && break
        sleep 0.1
    done
    for pid in "$@"; do if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi; done
    for ((i = 0; i < 100; i++)); do # gone from the process table, not left as zombies
        left=0
        for pid in "$@"; do if [ -e "/proc/$pid" ]; then left=1; fi; done
        [ "$left" -eq 0 ] && break
        sleep 0.1
    done
}

stop_all() { # stop_all FILE...: stop the processes the pid files name, those still in a node; remove the files
    local file pid pids=()
    for file in "$@"; do
        [ -e "$file" ] || continue
        pid=$(cat "$file" 2>/dev/null) || true
        if [ -n "$pid" ] && running "$pid" && ours "$pid"; then pids+=("$pid"); fi
    done
    [ ${#pids[@]} -eq 0 ] || stop_pids "${pids[@]}"
    for file in "$@"; do rm -f "$file"; done
}

stop_nodes() { # every process still in a node's network namespace: a rank, an ssh session, slurmstepd, an unrecorded daemon
    local ns round pids
    [ -f "$STATE/netns" ] || return 0
    for round in 1 2 3; do
        pids=()
        while read -r ns; do
            mapfile -t -O ${#pids[@]} pids < <(ip netns pids "$ns" 2>/dev/null)
        done <"$STATE/netns"
        [ ${#pids[@]} -eq 0 ] && return 0
        stop_pids "${pids[@]}"
    done
}

down() {
    [ -d "$STATE" ] || return 0
    local node
    if [ -d "$STATE/pids" ]; then
        # Slurm's daemons first, then sshd and munged, the namespace holders last
        stop_all "$STATE"/pids/*.slurmd "$STATE"/pids/*.slurmctld
        stop_all "$STATE"/pids/*.sshd "$STATE"/pids/*.munged
        stop_all "$STATE"/pids/*
    fi
    stop_nodes
    if [ -f "$STATE/veth" ]; then
        for node in "${NODES[@]}"; do
            ip link delete "suite-veth${node#node}" 2>/dev/null || true
        done
        rm -f "$STATE/veth"
    fi
    if [ -f "$STATE/netns" ]; then
        while read -r ns; do
            ip netns delete "$ns" 2>/dev/null || true
        done <"$STATE/netns"
        rm -f "$STATE/netns"
    fi
    if [ -f "$STATE/made-run-sshd" ]; then
        rmdir /run/sshd 2>/dev/null || true
        rm -f "$STATE/made-run-sshd"
    fi
    # the temporary keys (and everything else the cluster wrote)
    rm -rf "$STATE/ssh" "$STATE/munge.key"
}

command=${1:-}
STATE=${2:-}
[ -n "$command" ] && [ -n "$STATE" ] || die "usage: cluster.sh up|down|on|shape STATE [...]"
STATE=$(realpath -m "$STATE")
case $command in
up)
    RATE=${3:-1gbit}
    done_up=0
    trap '[ "$done_up" -eq 1 ] || { echo "cluster.sh: up failed; tearing down" >&2; log_tails; down; }' EXIT
    up
    done_up=1
    ;;
down) down ;;
on)
    shift 2
    on "$@"
    ;;
shape) shape "${3:?rate}" ;;
*) die "unknown command $command" ;;
esac
