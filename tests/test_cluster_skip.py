"""`make cluster-test`'s set-up and teardown, with fakes: what it fetches, what it skips, what `down` removes.

The real cluster runs only under `make cluster-test` (tests/cluster). Here ci/cluster/run.sh and setup.sh
run with a PATH of fakes: root (`id`), network namespaces (`ip`, `unshare`), `apt-get` and `dpkg-deb`
that log their calls and give a small set of packages, and a state folder under tmp_path, so nothing is
installed, started or changed on this machine.
"""

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = (
    "bash", "dirname", "mktemp", "grep", "tail", "rm", "rmdir", "chmod", "cat", "awk", "date", "sleep", "seq",
    "setsid", "cut", "mkdir", "cp", "sed", "ln", "xargs", "realpath", "touch", "basename", "readlink",
)  # fmt: skip

# What apt's simulation prints for the packages asked for: openssh-client is installed here (an upgrade), the rest new.
SIMULATION = """\
The following NEW packages will be installed:
Inst openssh-client [1:9.2p1-2+deb12u6] (1:9.2p1-2+deb12u10 Debian:12.15/oldstable [amd64])
Inst libwrap0 (7.6.q-32 Debian:12.15/oldstable [amd64])
Inst openssh-server (1:9.2p1-2+deb12u10 Debian:12.15/oldstable [amd64])
Inst munge (0.5.15-2+deb12u1 Debian:12.15/oldstable [amd64])
Inst pdsh (2.34-0.2 Debian:12.15/oldstable [amd64])
Inst slurm-client (22.05.8-4+deb12u3 Debian:12.15/oldstable [amd64])
Inst slurmctld (22.05.8-4+deb12u3 Debian:12.15/oldstable [amd64])
Inst slurmd (22.05.8-4+deb12u3 Debian:12.15/oldstable [amd64])
Conf slurmd (22.05.8-4+deb12u3 Debian:12.15/oldstable [amd64])
"""
FETCHED = [
    "openssh-client 1:9.2p1-2+deb12u10",
    "libwrap0 7.6.q-32",
    "openssh-server 1:9.2p1-2+deb12u10",
    "munge 0.5.15-2+deb12u1",
    "pdsh 2.34-0.2",
    "slurm-client 22.05.8-4+deb12u3",
    "slurmctld 22.05.8-4+deb12u3",
    "slurmd 22.05.8-4+deb12u3",
]

# apt-get: its sub-command and arguments (options left out) to LOG/apt-get.log
FAKE_APT = """\
while [ $# -gt 0 ]; do case $1 in -o) shift 2 ;; -*) shift ;; *) break ;; esac; done
echo "$*" >>"$FAKE_LOG/apt-get.log"
case $1 in
update) exit 0 ;;
install) cat "$FAKE_LOG/simulation" ;;
download) shift; for spec; do touch "${spec%%=*}_$(echo "${spec#*=}" | sed 's/:/%3a/')_amd64.deb"; done ;;
*) exit 1 ;;
esac
"""
# dpkg-deb -x DEB DIR: the package's files (empty); -I DEB postinst: slurmd's update-alternatives
FAKE_DPKG_DEB = """\
echo "$1 $(basename "$2") ${3##*/}" >>"$FAKE_LOG/dpkg-deb.log"
package=$(basename "$2"); package=${package%%_*}
if [ "$1" = -I ]; then
    if [ "$package" = slurmd ]; then
        printf '  configure)\\n      update-alternatives --install /usr/sbin/slurmd slurmd /usr/sbin/slurmd-wlm 50 \\\\\\n'
        printf '\\t--slave /usr/sbin/slurmstepd slurmstepd /usr/sbin/slurmstepd-wlm\\n'
    fi
    exit 0
fi
case $package in
slurmd) files="usr/sbin/slurmd-wlm usr/sbin/slurmstepd-wlm" ;;
slurmctld) files="usr/sbin/slurmctld" ;;
slurm-client) files="usr/bin/srun usr/bin/sbatch" ;;
munge) files="usr/sbin/munged" ;;
openssh-server) files="usr/sbin/sshd" ;;
openssh-client) files="usr/bin/ssh" ;;
pdsh) files="usr/bin/pdsh" ;;
libwrap0) files="lib/x86_64-linux-gnu/libwrap.so.0" ;;
esac
for file in $files; do mkdir -p "$3/$(dirname "$file")"; touch "$3/$file"; done
"""
# ip: its arguments to LOG/ip.log; no process is in any namespace
FAKE_IP = 'echo "$*" >>"$FAKE_LOG/ip.log"'
# anything that would change this machine: logged, never done
LOGGED = 'echo "$(basename "$0") $*" >>"$FAKE_LOG/changes.log"'


def fake_path(tmp_path: Path, apt_get: str = FAKE_APT) -> dict[str, str]:
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    (log / "simulation").write_text(SIMULATION)
    for tool in TOOLS:
        real = shutil.which(tool)
        assert real, tool
        (bin_dir / tool).symlink_to(real)
    fakes = {"id": "echo 0", "ip": FAKE_IP, "unshare": "exit 0", "apt-get": apt_get, "dpkg-deb": FAKE_DPKG_DEB}
    fakes |= {name: "exit 0" for name in ("tc", "nsenter", "ssh", "ssh-keygen")}  # here already: not fetched
    fakes |= {name: LOGGED for name in ("mount", "dpkg", "apt", "systemctl", "update-rc.d", "useradd")}
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!{shutil.which('bash')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    return {
        "PATH": str(bin_dir),
        "CLUSTER_SBIN": str(sbin),
        "CLUSTER_STATE_DIR": str(tmp_path / "state"),
        "FAKE_LOG": str(log),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }


def run_script(env: dict[str, str], script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("bash"), f"ci/cluster/{script}", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def log_lines(env: dict[str, str], name: str) -> list[str]:
    log = Path(env["FAKE_LOG"]) / name
    return log.read_text().splitlines() if log.exists() else []


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_packages_that_cannot_be_fetched_skip_in_one_line(tmp_path):
    apt_get = 'case "$*" in *update*) echo "Reading package lists..."; exit 0 ;; esac\n'
    apt_get += 'echo "Reading package lists..."; echo "E: Unable to locate package slurmd" >&2; exit 100'
    env = fake_path(tmp_path, apt_get)
    done = run_script(env, "run.sh")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and done.stderr == "" and len(lines) == 1, (done.stdout, done.stderr)
    assert lines[0].startswith("SKIPPED cluster-test: Slurm, munge, sshd or pdsh missing"), lines[0]
    assert "E: Unable to locate package slurmd" in lines[0]
    # apt's whole output is kept in the log the line names (in TMPDIR); the run's folder is gone again
    log = Path(lines[0].rsplit("log: ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path and "Reading package lists" in log.read_text()
    assert not Path(env["CLUSTER_STATE_DIR"]).exists()
    assert log_lines(env, "changes.log") == []


def test_without_apt_get_the_line_says_so(tmp_path):
    env = fake_path(tmp_path)
    os.remove(Path(env["PATH"]) / "apt-get")
    done = run_script(env, "run.sh")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stdout
    assert "no apt-get to fetch them (Debian/Ubuntu only)" in done.stdout
    assert "missing slurmctld slurmd srun sbatch munged sshd pdsh;" in done.stdout


def test_not_root_skips_before_touching_anything(tmp_path):
    env = fake_path(tmp_path)
    (Path(env["PATH"]) / "id").write_text(f"#!{shutil.which('bash')}\necho 1000\n")
    done = run_script(env, "run.sh")
    assert done.returncode == 0 and done.stdout.strip() == (
        "SKIPPED cluster-test: needs root (network namespaces, sshd, munge and Slurm daemons)"
    )
    assert not Path(env["CLUSTER_STATE_DIR"]).exists()


def test_setup_records_and_fetches_what_is_missing_into_its_folder_and_installs_nothing(tmp_path):
    env = fake_path(tmp_path)
    state = Path(env["CLUSTER_STATE_DIR"])
    state.mkdir()
    done = run_script(env, "setup.sh", str(state))
    assert done.returncode == 0, done.stderr
    # asked for the packages of the missing tools only (ssh and ssh-keygen are here), fetched the exact versions
    # apt would install (openssh-client's upgrade too, for the nodes only); nothing installed, upgraded or removed
    assert log_lines(env, "apt-get.log") == [
        "update",
        "install -s --no-install-recommends slurmctld slurmd slurm-client munge openssh-server pdsh",
        "download " + " ".join(line.replace(" ", "=") for line in FETCHED),
    ]
    assert (state / "packages").read_text().splitlines() == FETCHED
    assert {line.split()[0] for line in log_lines(env, "dpkg-deb.log")} == {"-x", "-I"}
    assert log_lines(env, "changes.log") == []
    # the links slurmd's package script would make; a package's /lib files under usr/ where /lib is a link
    root = state / "root"
    assert os.readlink(root / "usr/sbin/slurmd") == "/usr/sbin/slurmd-wlm"
    assert os.readlink(root / "usr/sbin/slurmstepd") == "/usr/sbin/slurmstepd-wlm"
    merged = Path("/lib").is_symlink()
    assert (root / "usr/lib/x86_64-linux-gnu/libwrap.so.0").exists() == merged
    assert (root / "lib").exists() != merged


def test_down_after_a_killed_run_removes_exactly_what_it_recorded(tmp_path):
    env = fake_path(tmp_path)
    state = Path(env["CLUSTER_STATE_DIR"])
    state.mkdir()
    assert run_script(env, "setup.sh", str(state)).returncode == 0
    # what a run SIGKILLed in `cluster.sh up` leaves: its owner gone, namespaces and link recorded, a daemon running
    (state / "owner").write_text(f"{os.getpid()} 1\n")  # that pid, but another start time: not the owner
    cluster = state / "cluster"
    (cluster / "pids").mkdir(parents=True)
    (cluster / "netns").write_text("suite-node1\nsuite-node2\n")
    (cluster / "veth").write_text("suite-veth1\n")
    ours = subprocess.Popen([shutil.which("sleep"), "300"], env={"SUITE_CLUSTER_TEST_DIR": str(state)})
    (cluster / "pids" / "node1.munged").write_text(f"{ours.pid}\n")
    other = subprocess.Popen([shutil.which("sleep"), "300"], env={"SUITE_CLUSTER_TEST_DIR": str(tmp_path / "another")})
    kept = tmp_path / "kept.txt"
    kept.write_text("not the cluster test's")
    try:
        done = run_script(env, "run.sh", "down")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("cluster-down: removed what the cluster test left"), done.stdout
        assert ours.wait(timeout=30) == -15  # stopped by SIGTERM
        assert other.poll() is None
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()
    assert not state.exists() and kept.read_text() == "not the cluster test's"
    deleted = [line for line in log_lines(env, "ip.log") if " delete " in line]
    assert deleted == [
        "link delete suite-veth1",
        "link delete suite-veth2",
        "netns delete suite-node1",
        "netns delete suite-node2",
    ]
    assert log_lines(env, "changes.log") == [] and len(log_lines(env, "apt-get.log")) == 3  # setup's calls only


def test_down_leaves_a_running_cluster_test_alone(tmp_path):
    env = fake_path(tmp_path)
    state = Path(env["CLUSTER_STATE_DIR"])
    state.mkdir()
    (state / "owner").write_text(f"{os.getpid()} {start_time(os.getpid())}\n")
    done = run_script(env, "run.sh", "down")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"cluster-down: the cluster test that owns {state} is still running (pid {os.getpid()}); stop it and it tears down itself"
    )
    assert (state / "owner").exists() and log_lines(env, "ip.log") == []


def test_a_run_after_a_killed_one_first_removes_what_that_left(tmp_path):
    apt_get = 'case "$*" in *update*) exit 0 ;; esac; echo "E: Temporary failure resolving deb.debian.org" >&2; exit 100'
    env = fake_path(tmp_path, apt_get)
    state = Path(env["CLUSTER_STATE_DIR"])
    (state / "cluster").mkdir(parents=True)
    (state / "owner").write_text(f"{os.getpid()} 1\n")
    (state / "cluster" / "netns").write_text("suite-node1\n")
    left = subprocess.Popen([shutil.which("sleep"), "300"], env={"SUITE_CLUSTER_TEST_DIR": str(state)})
    try:
        done = run_script(env, "run.sh")
        assert left.wait(timeout=30) == -15
    finally:
        left.kill()
        left.wait()
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 2, done.stdout
    assert lines[0] == f"cluster-test: an earlier cluster test ended before its teardown; removing what it left ({state})"
    assert lines[1].startswith("SKIPPED cluster-test:") and "E: Temporary failure resolving" in lines[1]
    assert "netns delete suite-node1" in log_lines(env, "ip.log") and not state.exists()
