"""Job scripts that run on their first submission: the scenario travels by name, ``--set`` reaches the job's run, the
site's queue limits are kept, torch is checked to see the GPUs asked for, and srun's GPU binding is the preset's.
The docs' `suite jobscript` examples are run here too, so that they cannot drift from what the command accepts."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.config.builtin import BUILTIN_DIR
from suite.running import visible_gpus
from suite.running.jobplan import JobOptions
from suite.running.jobscript import render

REPO = Path(__file__).resolve().parent.parent


def scenario(tmp_path: Path, procs: list[int], engine: str = "torch") -> Path:
    path = tmp_path / "js.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("js", [{"strategy": "data_parallel", "engine": engine, "procs": procs}])))
    return path


def run_line(text: str) -> str:
    return next(line for line in text.splitlines() if " -m suite run " in line)


def test_a_built_in_scenario_travels_by_name_never_as_the_login_nodes_file():
    """By name, and by the installed file's absolute path, the script names the scenario, which the nodes' suite finds
    wherever its package lies; a scenario file keeps the path given (read from the working folder)."""
    by_name = render("quickstart", JobOptions(site="perlmutter", venv=".venv"))
    assert " -m suite run quickstart --out results/quickstart " in run_line(by_name)
    installed = (BUILTIN_DIR / "quickstart.yaml").resolve()
    by_path = render(installed, JobOptions(site="perlmutter", venv=".venv"))
    assert " -m suite run quickstart " in run_line(by_path) and str(installed) not in by_path


def test_a_scenario_file_keeps_the_path_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario(tmp_path, [2])
    assert " -m suite run js.yaml " in run_line(render("js.yaml", JobOptions(scheduler="slurm")))


def test_set_is_checked_and_reaches_the_jobs_run(tmp_path, capsys):
    """``--set`` changes the scenario the script is sized from and is passed on to the node's ``suite run``; a field no
    scenario holds is refused in one line, as by ``suite run``."""
    out = tmp_path / "job.sh"
    argv = ["jobscript", str(scenario(tmp_path, [2])), "--scheduler", "slurm", "--out", str(out), "--force"]
    assert main([*argv, "--set", "train.lr=0.0005", "--set", "train.betas=[0.5, 0.9]"]) == 0
    assert "--set train.lr=0.0005 --set 'train.betas=[0.5, 0.9]'" in run_line(out.read_text())
    assert main([*argv, "--set", "train.nope=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --set train.nope: train has no field 'nope'")


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--site", "frontier", "--account", "p1", "--walltime", "6:00:00"],
            "error: --walltime '6:00:00': frontier's batch partition allows at most 2 h for 1-91 nodes (this job: 1 node; "
            "OLCF's Frontier user guide",
        ),
        (
            ["--site", "perlmutter", "--queue", "debug", "--walltime", "1:00:00"],
            "error: --walltime '1:00:00': perlmutter's debug QOS allows at most 30 min for 1-8 nodes (this job: 1 node; "
            "NERSC's QOS limits",
        ),
        (
            ["--site", "summit", "--account", "p1", "--walltime", "3:00:00"],
            "error: --walltime '3:00:00': summit's batch queue allows at most 2 h for 1-45 nodes",
        ),
        (
            ["--site", "frontier", "--account", "p1", "-p", "extended"],
            None,  # the option does not exist: argparse refuses, no limit message
        ),
    ],
)
def test_a_walltime_past_the_sites_limit_is_refused_naming_it(tmp_path, capsys, options, message):
    argv = ["jobscript", str(scenario(tmp_path, [2])), "--venv", "v", "--out", str(tmp_path / "job.sh"), *options]
    if message is None:
        with pytest.raises(SystemExit):
            main(argv)
        return
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
    assert "--no-site-limits writes it anyway" in err[0]
    assert main([*argv, "--no-site-limits"]) == 0  # the escape for a site that changed its limits


def test_the_default_walltime_is_the_queues_limit_where_shorter(tmp_path):
    path = scenario(tmp_path, [2])
    debug = render(path, JobOptions(site="perlmutter", venv="v", queue="debug"))
    assert "#SBATCH --time=00:30:00" in debug
    assert "#SBATCH --time=02:00:00" in render(path, JobOptions(site="perlmutter", venv="v"))
    assert "#SBATCH --time=1-00:00:00" in render(
        path, JobOptions(site="frontier", account="p1", venv="v", queue="extended", walltime="24h")
    )


def test_more_nodes_than_the_queue_takes_are_refused(tmp_path):
    """Perlmutter's debug QOS takes 8 nodes; a largest run of 16 ranks at 1 per node needs 16."""
    with pytest.raises(
        ValueError, match=r"^nodes: the largest run needs 16 nodes of 1 ranks; perlmutter's debug QOS takes at most 8 nodes"
    ):
        render(scenario(tmp_path, [16]), JobOptions(site="perlmutter", venv="v", queue="debug", ranks_per_node=1))


def test_the_sites_other_queues_and_qoses_keep_their_limits(tmp_path):
    """Frontier's debug QOS (2 h at any size, on top of the batch partition's bins) is a QOS, not a partition; Summit's
    debug (2 h), batch-hm (54 nodes, 24 h) and killable (24 h, at most 91 nodes) queues, as OLCF's guides give them."""

    def sized(procs: int) -> Path:  # a global batch every one of these process counts divides
        path = tmp_path / f"wide{procs}.yaml"
        runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [procs]}]
        path.write_text(yaml.safe_dump(tiny_scenario("wide", runs, train={"batch_size": 4800})))
        return path

    wide = sized(800)  # 100 Frontier nodes of 8 GCDs: the batch partition's bin 4 allows 6 h
    frontier = JobOptions(site="frontier", account="p1", venv="v", walltime="6h")
    assert "#SBATCH --time=06:00:00" in render(wide, frontier)
    with pytest.raises(ValueError, match=r"^--walltime '6h': frontier's debug QOS allows at most 2 h for 1-9,472 nodes"):
        render(wide, JobOptions(site="frontier", account="p1", venv="v", walltime="6h", qos="debug"))
    # a partition named debug is not the debug QOS: its walltime is not that QOS's to check
    assert "#SBATCH --time=06:00:00" in render(
        wide, JobOptions(site="frontier", account="p1", venv="v", walltime="6h", queue="debug")
    )
    small = sized(6)
    summit = {"site": "summit", "account": "p1", "conda": "env", "module": ("miniforge3/23.11.0",)}
    with pytest.raises(ValueError, match=r"^--walltime '3h': summit's debug queue allows at most 2 h for 1-4,608 nodes"):
        render(small, JobOptions(**summit, queue="debug", walltime="3h"))
    assert "#BSUB -W 24:00" in render(small, JobOptions(**summit, queue="killable", walltime="24h"))
    assert "#BSUB -W 24:00" in render(small, JobOptions(**summit, queue="batch-hm", walltime="24h"))
    with pytest.raises(ValueError, match=r"summit's killable queue takes at most 91 nodes and this job needs 100"):
        render(sized(600), JobOptions(**summit, queue="killable", walltime="1h"))
    with pytest.raises(ValueError, match=r"summit's batch-hm queue takes at most 54 nodes and this job needs 100"):
        render(sized(600), JobOptions(**summit, queue="batch-hm", walltime="1h"))


def test_perlmutters_srun_steps_bind_no_gpu_so_every_rank_sees_the_nodes(tmp_path):
    text = render(scenario(tmp_path, [8]), JobOptions(site="perlmutter", venv="v"))
    assert "#SBATCH --gpu-bind=none" in text
    assert "export SLURM_GPU_BIND=none  # srun --gpu-bind=none, for every run's srun" in text.splitlines()
    assert "SLURM_GPU_BIND" not in render(scenario(tmp_path, [8]), JobOptions(site="perlmutter", venv="v", gpus_per_rank=0))


def _fake_node(tmp_path: Path, gpu_check: str) -> dict[str, str]:
    """A node whose python3 imports the suite, answers the GPU check with ``gpu_check`` (shell) and echoes the rest."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    python = f'#!/bin/sh\n[ "$1" = -c ] && exit 0\nif [ "$2" = suite.running.visible_gpus ]; then {gpu_check}; fi\necho "$@"\n'
    (bin_dir / "python3").write_text(python)
    for tool in ("scontrol", "python3"):
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SLURM_JOB_NODELIST": "n1"}


def test_a_gpu_job_ends_at_once_in_one_line_when_torch_sees_no_gpu(tmp_path):
    """The script asks torch for the node's GPUs of the site's vendor before anything is launched; when torch does not
    see them the job ends with exit 2 and one line saying what torch sees; SUITE_DEVICE=cpu skips the check."""
    (tmp_path / "v" / "bin").mkdir(parents=True)
    (tmp_path / "v" / "bin" / "activate").write_text("")
    text = render(scenario(tmp_path, [4]), JobOptions(site="perlmutter", venv="v", module=()))
    assert "python3 -m suite.running.visible_gpus 4 nvidia" in text
    job = tmp_path / "job.sh"
    job.write_text(text.replace("module load pytorch\n", ""))
    env = _fake_node(
        tmp_path, "echo 'torch 2.13.0+cpu (CPU-only) is not a CUDA build, and this site'\"'\"'s GPUs are NVIDIA' >&2; exit 1"
    )
    done = subprocess.run(["bash", str(job)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "-m suite run " not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: on ") and "is not a CUDA build" in lines[0], done.stderr
    assert "SUITE_DEVICE=cpu" in lines[0]
    skipped = subprocess.run(
        ["bash", str(job)], capture_output=True, text=True, env={**env, "SUITE_DEVICE": "cpu"}, cwd=tmp_path, timeout=60
    )
    assert skipped.returncode == 0 and skipped.stdout.startswith("-m suite run "), skipped.stderr
    no_gpus = render(scenario(tmp_path, [4]), JobOptions(site="perlmutter", venv="v", gpus_per_rank=0))
    assert "visible_gpus" not in no_gpus


def test_frontiers_check_asks_for_a_rocm_torch(tmp_path):
    text = render(scenario(tmp_path, [2]), JobOptions(site="frontier", account="p1", venv="v"))
    assert "python3 -m suite.running.visible_gpus 2 amd" in text


def test_visible_gpus_says_what_torch_sees(monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.version, "cuda", None, raising=False)
    assert "is not a ROCm build, and this site's GPUs are AMD" in visible_gpus.gpu_problem(1, "amd")
    assert "is not a CUDA build" in visible_gpus.gpu_problem(1, "nvidia")
    monkeypatch.setattr(torch.version, "cuda", "12.4", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert visible_gpus.gpu_problem(2, "nvidia") is None
    assert "(CUDA 12.4) sees 2 GPUs here, and this job asked for 4" in visible_gpus.gpu_problem(4, "nvidia")
    assert visible_gpus.main(["x", "nvidia"]) == 2


def _doc_examples() -> list[str]:
    """Every `suite jobscript ...` line of the docs' shell blocks (docs/clusters.md, the README, the quickstart)."""
    found = []
    for page in (REPO / "docs" / "clusters.md", REPO / "docs" / "quickstart.md", REPO / "README.md"):
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
            found += [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("suite jobscript ")]
    return found


def test_the_docs_examples_write_their_scripts(tmp_path, monkeypatch, capsys):
    """Each example runs as written, from an empty folder (no checkout: scenarios by name), and writes the script the
    page says it does; so the examples cannot drift from what the command accepts or from the sites' limits."""
    examples = _doc_examples()
    assert len(examples) >= 3, examples
    monkeypatch.chdir(tmp_path)
    for example in examples:
        argv = example.split()[1:]
        assert main(argv) == 0, (example, capsys.readouterr().err)
        written = capsys.readouterr().out.strip().removeprefix("job script written to ")
        assert (tmp_path / written).is_file(), example
        assert os.access(tmp_path / written, os.X_OK)
