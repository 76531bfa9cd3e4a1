#!/usr/bin/env bash
# Installs what `make cluster-test` needs from Debian's packages: Slurm (slurmctld, slurmd,
# the client commands), munge, OpenSSH's server, iproute2 (ip netns, tc) and util-linux
# (unshare, nsenter). Root only; exits 0 at once when everything is there already.
#
# Package scripts are told not to start any service (a temporary policy-rc.d, removed after):
# the cluster test starts its own daemons, in its own namespaces, with its own temporary keys
# and configuration, and stops them again. CLUSTER_SBIN (default /usr/sbin): where root's daemons
# are looked for besides PATH, and where the temporary policy-rc.d goes (the tests point it elsewhere).
set -euo pipefail
SBIN=${CLUSTER_SBIN:-/usr/sbin}

needed=(slurmctld slurmd srun sbatch munged mungekey sshd pdsh ip tc unshare nsenter)
missing=()
for tool in "${needed[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "$SBIN/$tool" ] || missing+=("$tool")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ci/cluster/setup.sh: missing ${missing[*]}; installing them needs root" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci/cluster/setup.sh: missing ${missing[*]}; no apt-get to install them (Debian/Ubuntu only)" >&2
    exit 1
fi

policy=$SBIN/policy-rc.d
placed=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    placed=1
fi
cleanup() { if [ "$placed" -eq 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
    slurm-wlm slurmctld slurmd slurm-client munge openssh-server openssh-client pdsh iproute2 util-linux
