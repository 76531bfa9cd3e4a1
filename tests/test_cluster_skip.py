"""`make cluster-test` where the cluster's packages cannot be installed: one SKIPPED line naming why, exit 0.

The real cluster runs only under `make cluster-test` (tests/cluster). Here ci/cluster/run.sh runs with a
PATH of fakes: root (`id`), network namespaces (`ip`), and an `apt-get` that cannot find Slurm's packages,
so nothing is installed, started or changed on this machine.
"""

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("bash", "dirname", "mktemp", "grep", "tail", "rm", "chmod", "cat", "awk", "date", "sleep", "seq", "setsid")


def fake_path(tmp_path: Path, apt_get: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        real = shutil.which(tool)
        assert real, tool
        (bin_dir / tool).symlink_to(real)
    fakes = {"id": "echo 0", "ip": "exit 0", "apt-get": apt_get}
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!{shutil.which('bash')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    return {"PATH": str(bin_dir), "CLUSTER_SBIN": str(sbin), "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}


def run_cluster_test(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("bash"), "ci/cluster/run.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def test_packages_that_cannot_install_skip_in_one_line(tmp_path):
    apt_get = 'if [ "$1" = update ]; then echo "Reading package lists..."; exit 0; fi\n'
    apt_get += 'echo "Reading package lists..."; echo "E: Unable to locate package slurmd" >&2; exit 100'
    env = fake_path(tmp_path, apt_get)
    done = run_cluster_test(env)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and done.stderr == "" and len(lines) == 1, (done.stdout, done.stderr)
    assert lines[0].startswith("SKIPPED cluster-test: Slurm, munge, sshd or pdsh missing"), lines[0]
    assert "E: Unable to locate package slurmd" in lines[0]
    # apt's whole output is kept in the log the line names; the temporary policy-rc.d is gone again
    log = Path(lines[0].rsplit("log: ", 1)[1].rstrip(")"))
    assert "Reading package lists" in log.read_text()
    assert not (Path(env["CLUSTER_SBIN"]) / "policy-rc.d").exists()


def test_without_apt_get_the_line_says_so(tmp_path):
    env = fake_path(tmp_path, "exit 0")
    os.remove(Path(env["PATH"]) / "apt-get")
    done = run_cluster_test(env)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stdout
    assert "no apt-get to install them (Debian/Ubuntu only)" in done.stdout
    assert "missing slurmctld slurmd srun sbatch munged" in done.stdout


def test_not_root_skips_before_touching_anything(tmp_path):
    env = fake_path(tmp_path, "exit 1")
    (Path(env["PATH"]) / "id").write_text(f"#!{shutil.which('bash')}\necho 1000\n")
    done = run_cluster_test(env)
    assert done.returncode == 0 and done.stdout.strip() == (
        "SKIPPED cluster-test: needs root (network namespaces, sshd, munge and Slurm daemons)"
    )
