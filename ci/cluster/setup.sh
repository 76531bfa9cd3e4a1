#!/usr/bin/env bash
# Fetches what `make cluster-test` runs on its nodes and this machine lacks: Slurm (slurmctld,
# slurmd, the client commands), munge, OpenSSH's server and client, pdsh, from Debian's packages,
# into a folder of its own. Nothing is installed: no package is unpacked into the system, no
# package script runs (so no user, key or service is made, and nothing is enabled for boot), no
# installed package is upgraded, and apt's lists and downloads stay in that folder too.
# ci/cluster/cluster.sh lays the folder over /usr inside each node's own mount namespace only.
#
#   setup.sh DIR     DIR: the cluster test's state folder (ci/cluster/run.sh makes it)
#
# Writes DIR/packages (one `name version` a line, written before anything is fetched: what the
# nodes get besides this machine's own), DIR/apt/ (apt's lists and the .deb files) and DIR/root/
# (the packages' files, with the links their scripts would make with update-alternatives).
# Exits 0 at once, fetching nothing, when every tool is here already. CLUSTER_SBIN (default
# /usr/sbin): where root's daemons are looked for besides PATH (the tests point it elsewhere).
set -euo pipefail
DIR=${1:?usage: setup.sh DIR}
SBIN=${CLUSTER_SBIN:-/usr/sbin}
ROOT=$DIR/root

# tool:package, for every tool the nodes run
TOOLS=(slurmctld:slurmctld slurmd:slurmd srun:slurm-client sbatch:slurm-client munged:munge
    sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client pdsh:pdsh)
# what this machine itself needs: the namespaces are made here, not on a node
for tool in ip tc unshare nsenter mount; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "ci/cluster/setup.sh: no $tool here (iproute2, util-linux, mount)" >&2
        exit 1
    }
done

present() { command -v "$1" >/dev/null 2>&1 || [ -x "$SBIN/$1" ]; }
missing=() packages=()
for pair in "${TOOLS[@]}"; do
    tool=${pair%%:*} package=${pair#*:}
    present "$tool" && continue
    missing+=("$tool")
    [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    : >"$DIR/packages"
    exit 0
fi
for tool in apt-get dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "ci/cluster/setup.sh: missing ${missing[*]}; no $tool to fetch them (Debian/Ubuntu only)" >&2
        exit 1
    }
done

mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/apt/debs" "$ROOT"
# apt's lists and caches in DIR: this machine's own are neither read nor rewritten
apt=(apt-get -q -o "Dir::State::Lists=$DIR/apt/lists" -o "Dir::Cache=$DIR/apt/cache"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)
"${apt[@]}" update
# What an install would unpack, new packages and upgrades alike, read from apt's simulation (which
# only reads dpkg's status, so it takes no lock), recorded before anything is fetched.
"${apt[@]}" -o Debug::NoLocking=true install -s --no-install-recommends "${packages[@]}" |
    awk '$1 == "Inst" { version = ($3 ~ /^\[/) ? $4 : $3; sub(/^\(/, "", version); print $2, version }' >"$DIR/packages"
[ -s "$DIR/packages" ] || {
    echo "ci/cluster/setup.sh: apt-get would install nothing for ${packages[*]}, yet ${missing[*]} are missing" >&2
    exit 1
}
mapfile -t exact < <(awk '{print $1 "=" $2}' "$DIR/packages")
(cd "$DIR/apt/debs" && "${apt[@]}" download "${exact[@]}")

alternatives() { # alternatives DEB: the links its postinst makes with update-alternatives (--install, --slave)
    dpkg-deb -I "$1" postinst 2>/dev/null | sed -e ':a' -e '/\\$/{N;s/\\\n//;ba}' |
        grep -oE -- '--(install|slave) +/[^ ]+ +[^ ]+ +/[^ ]+' || true
}
for deb in "$DIR"/apt/debs/*.deb; do
    dpkg-deb -x "$deb" "$ROOT"
    alternatives "$deb" | while read -r _ link _ target; do
        if [ ! -e "$ROOT$link" ] && [ ! -L "$ROOT$link" ]; then
            mkdir -p "$(dirname "$ROOT$link")"
            ln -s "$target" "$ROOT$link"
        fi
    done
done
# On a merged-/usr system (/lib a link to usr/lib) a package's /lib, /bin, /sbin files go under usr/.
for top in bin sbin lib lib64; do
    if [ -L "/$top" ] && [ -d "$ROOT/$top" ] && [ ! -L "$ROOT/$top" ]; then
        mkdir -p "$ROOT/usr/$top"
        cp -a "$ROOT/$top/." "$ROOT/usr/$top/"
        rm -rf "${ROOT:?}/$top"
    fi
done

# Every missing tool is there, and runs with the folder laid over /usr (a private mount namespace).
for tool in "${missing[@]}"; do
    found=0
    for sub in usr/bin usr/sbin bin sbin; do
        if [ -e "$ROOT/$sub/$tool" ] || [ -L "$ROOT/$sub/$tool" ]; then found=1; fi
    done
    [ "$found" -eq 1 ] || {
        echo "ci/cluster/setup.sh: $tool is not in the packages fetched ($(awk '{print $1}' "$DIR/packages" | xargs))" >&2
        exit 1
    }
done
layers=$(dirname "$0")/layers.sh
checks='export PATH=/usr/sbin:/usr/bin:$PATH; slurmd -V && slurmctld -V && munged -V && pdsh -V && sshd -V 2>&1 | grep OpenSSH'
unshare --mount --propagation private bash -c "bash $layers $ROOT && $checks" || {
    echo "ci/cluster/setup.sh: the fetched packages do not run laid over /usr (overlayfs; see the lines above)" >&2
    exit 1
}
echo "ci/cluster/setup.sh: fetched for the nodes, into $ROOT: $(awk '{print $1}' "$DIR/packages" | xargs)"
