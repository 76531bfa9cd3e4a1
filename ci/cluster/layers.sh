#!/usr/bin/env bash
# Lays the packages ci/cluster/setup.sh fetched over this machine's folders, read-only (overlayfs),
# in the current mount namespace, which must be a private one: a node's (ci/cluster/cluster.sh),
# or `unshare --mount --propagation private`. Outside it this machine's /usr is not touched.
#
#   layers.sh PKGROOT
#
# Each of PKGROOT's top folders that this machine has as a folder of its own is laid over it: usr,
# and on a system without merged /usr also bin, sbin, lib and lib64 (setup.sh moves a package's
# /lib files under usr/ where /lib is a link to usr/lib).
set -euo pipefail
root=${1:?usage: layers.sh PKGROOT}
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
    echo "layers.sh: not in a private mount namespace; this machine's folders are left alone" >&2
    exit 1
fi
for top in usr bin sbin lib lib64; do
    if [ -d "$root/$top" ] && [ -d "/$top" ] && [ ! -L "/$top" ]; then
        mount -t overlay suite-packages -o "lowerdir=$root/$top:/$top" "/$top"
    fi
done
