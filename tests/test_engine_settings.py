"""Engine settings: validated in the scenario, reaching the engine (Horovod's environment, DDP's
constructor, DeepSpeed's config), read back for the record, and compared in the report."""

import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import DDPConfig, HorovodConfig, ScenarioError
from suite.records.results import new_record
from suite.train.engines.base import Group
from suite.train.engines.horovod import CPU_CYCLE_TIME_MS, horovod_environment, horovod_settings
from suite.train.launchenv import LaunchInfo

RUN_DIR = Path("/results/RUN")


def scenario(*runs, **sections):
    return parse_scenario({"name": "s", "runs": list(runs), **sections}, source="s.yaml")


# --- the scenario ------------------------------------------------------------------------------------------


def test_scenario_settings_apply_to_their_engine_and_runs_override_them_field_by_field():
    runs = expand(
        scenario(
            {"strategy": "data_parallel", "engine": "horovod", "procs": [2], "horovod": {"fusion_threshold_mb": 32}},
            {"strategy": "data_parallel", "engine": "horovod", "procs": [2], "label": "own", "horovod": {"cycle_time_ms": 2}},
            {"strategy": "data_parallel", "engine": "torch", "procs": [2], "ddp": {"static_graph": True}},
            horovod={"cycle_time_ms": 5},
            ddp={"bucket_cap_mb": 10},
        )
    )
    assert runs[0].horovod == HorovodConfig(cycle_time_ms=5, fusion_threshold_mb=32)
    assert runs[1].horovod == HorovodConfig(cycle_time_ms=2)
    assert runs[2].ddp == DDPConfig(bucket_cap_mb=10, static_graph=True)
    assert not any(r.trace for r in runs)


@pytest.mark.parametrize(
    "run, sections, message",
    [
        (
            {"engine": "torch", "horovod": {"cycle_time_ms": 5}},
            {},
            r"runs\[0\].horovod: only the horovod engine takes horovod settings, not torch",
        ),
        ({"engine": "horovod", "ddp": {"static_graph": True}}, {}, r"runs\[0\].ddp: only the torch engine takes ddp settings"),
        ({"engine": "horovod", "horovod": {"cycle_time_ms": -1}}, {}, r"runs\[0\].horovod.cycle_time_ms: must not be negative"),
        (
            {"engine": "horovod", "horovod": {"fusion_threshold_mb": 1.5}},
            {},
            r"runs\[0\].horovod.fusion_threshold_mb: expected an integer",
        ),
        ({"engine": "horovod", "horovod": {"cycle": 5}}, {}, r"runs\[0\].horovod.cycle: unknown field"),
        ({"engine": "horovod", "horovod": {"groups": 0}}, {}, r"runs\[0\].horovod.groups: must be at least 1"),
        ({"engine": "torch"}, {"ddp": {"bucket_cap_mb": 0}}, r"s.yaml: ddp.bucket_cap_mb: must be positive"),
        ({"engine": "torch", "trace": "yes"}, {}, r"runs\[0\].trace: expected true or false"),
    ],
)
def test_bad_engine_settings_name_the_field(run, sections, message):
    with pytest.raises(ScenarioError, match=message):
        scenario({"strategy": "data_parallel", "procs": [2], **run}, **sections)


# --- Horovod: the environment hvd.init() reads --------------------------------------------------------------


def test_horovod_on_a_cpu_gets_the_suite_cycle_time_and_horovods_other_defaults():
    env = horovod_environment(HorovodConfig(), {}, on_gpu=False, run_dir=RUN_DIR, trace=False)
    assert env == {"HOROVOD_CYCLE_TIME": str(CPU_CYCLE_TIME_MS)}
    assert horovod_settings(env) == {
        "cycle_time_ms": CPU_CYCLE_TIME_MS,
        "fusion_threshold_mb": 128.0,
        "cache_capacity": 1024,
        "hierarchical_allreduce": False,
        "hierarchical_allgather": False,
        "autotune": False,
        "timeline_mark_cycles": False,
        "timeline": None,
    }


def test_horovod_on_a_gpu_keeps_horovods_own_cycle_time():
    env = horovod_environment(HorovodConfig(), {}, on_gpu=True, run_dir=RUN_DIR, trace=False)
    assert env == {} and horovod_settings(env)["cycle_time_ms"] == 1.0


def test_scenario_values_win_and_null_fields_keep_the_launch_environment():
    config = HorovodConfig(fusion_threshold_mb=32, cache_capacity=0, hierarchical_allreduce=True)
    launch = {"HOROVOD_CYCLE_TIME": "3.5", "HOROVOD_FUSION_THRESHOLD": str(64 * 2**20)}  # e.g. from horovodrun flags
    env = horovod_environment(config, launch, on_gpu=False, run_dir=RUN_DIR, trace=False)
    assert env == {
        "HOROVOD_FUSION_THRESHOLD": str(32 * 2**20),
        "HOROVOD_CACHE_CAPACITY": "0",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
    }
    settings = horovod_settings({**launch, **env})
    assert (settings["cycle_time_ms"], settings["fusion_threshold_mb"], settings["cache_capacity"]) == (3.5, 32.0, 0)
    assert settings["hierarchical_allreduce"] is True


def test_trace_puts_horovods_timeline_in_the_run_folder():
    env = horovod_environment(
        HorovodConfig(cycle_time_ms=2, timeline_mark_cycles=True), {}, on_gpu=False, run_dir=RUN_DIR, trace=True
    )
    assert env == {
        "HOROVOD_CYCLE_TIME": "2",
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "HOROVOD_TIMELINE": str(RUN_DIR / "horovod-timeline.json"),
    }


def test_autotune_tunes_what_is_not_set_and_logs_in_the_run_folder(tmp_path):
    env = horovod_environment(HorovodConfig(autotune=True, cache_capacity=1024), {}, on_gpu=False, run_dir=tmp_path, trace=False)
    # no suite cycle time: a value set in the environment would hold it fixed
    assert env == {
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_CACHE_CAPACITY": "1024",
        "HOROVOD_AUTOTUNE_LOG": str(tmp_path / "horovod-autotune.csv"),
    }
    settings = horovod_settings(env)
    assert settings["autotuned"] == ["cycle_time_ms", "fusion_threshold_mb", "hierarchical_allreduce", "hierarchical_allgather"]
    assert settings["cycle_time_ms"] is None and settings["cache_capacity"] == 1024
    assert settings["autotune_log"] is None  # Horovod has not written it yet
    # Horovod's format (parameter_manager.cc): note the ", " after torus_allreduce; the best row comes last
    (tmp_path / "horovod-autotune.csv").write_text(
        "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,tensor_fusion_threshold,score\n"
        "0,0,0, 1,5,4,120.5\n0,0,0, 1,50,32,310.25\n0,0,0, 0,25,16,90\n0,0,0, 1,50,32,310.25\n"
    )
    assert horovod_settings(env)["autotune_log"] == {
        "samples": 4,
        "best": {
            "cycle_time_ms": 50.0,
            "fusion_threshold_mb": 32.0,
            "cache_enabled": True,
            "hierarchical_allreduce": False,
            "hierarchical_allgather": False,
            "score_bytes_per_us": 310.25,
        },
    }


def test_environment_values_are_read_as_horovod_reads_them():
    settings = horovod_settings(
        {"HOROVOD_CYCLE_TIME": "2.5ms", "HOROVOD_HIERARCHICAL_ALLGATHER": "true", "HOROVOD_AUTOTUNE": "0"}
    )
    assert settings["cycle_time_ms"] == 2.5 and settings["hierarchical_allgather"] is False and settings["autotune"] is False


def test_horovods_optimizer_gets_the_runs_groups(monkeypatch, tmp_path):
    """HorovodReplica hands ``horovod.groups`` to DistributedOptimizer (Horovod itself replaced by a recorder)."""
    from suite.train.engines.horovod import HorovodEngine, HorovodReplica

    made, enqueued, events = {}, [], []
    fake = types.SimpleNamespace(
        Average="average",
        broadcast_async_=lambda tensor, **kwargs: enqueued.append(kwargs) or events.append("enqueue") or len(enqueued),
        synchronize=lambda handle: events.append(f"wait {handle}"),
        DistributedOptimizer=lambda optimizer, **kwargs: made.update(kwargs) or optimizer,
    )
    import horovod

    monkeypatch.setitem(sys.modules, "horovod.torch", fake)
    monkeypatch.setattr(horovod, "torch", fake, raising=False)  # `import horovod.torch as hvd` reads the attribute
    engine = HorovodEngine(HorovodConfig(groups=1), tmp_path)
    net = nn.Linear(3, 2)
    HorovodReplica(net, torch.optim.SGD(net.parameters(), lr=0.1), engine, Group(0, [0, 1], 0, "world"), "G")
    assert made["groups"] == 1 and made["op"] == "average" and made["process_set"] == "world"
    assert [name for name, _ in made["named_parameters"]] == ["G.weight", "G.bias"]
    # every tensor starts from the group's first rank, all broadcasts enqueued before any is waited for
    assert [(k["name"], k["root_rank"], k["process_set"]) for k in enqueued] == [
        ("init.G.weight", 0, "world"),
        ("init.G.bias", 0, "world"),
    ]
    assert events == ["enqueue", "enqueue", "wait 1", "wait 2"]


def fake_horovod(nccl: int) -> types.SimpleNamespace:
    """What the Horovod engine calls of ``horovod.torch`` to form process sets and reduce (a recorder, no Horovod)."""
    made = iter(range(1, 100))
    return types.SimpleNamespace(
        Sum="sum",
        global_process_set=types.SimpleNamespace(process_set_id=0),
        add_process_set=lambda ranks: types.SimpleNamespace(process_set_id=next(made), ranks=ranks),
        allreduce_=lambda tensor, **kwargs: tensor,
        nccl_built=lambda: nccl,
        mpi_enabled=lambda: False,
    )


def test_horovod_records_its_process_sets_and_allreduce_operations(tmp_path):
    """The record's ``sets_formed`` and ``allreduce_ops`` come from what the engine did, and pass its gpu-check."""
    from suite.train.engines.horovod import HorovodEngine

    engine = HorovodEngine(HorovodConfig(), tmp_path, groups=True)
    engine.hvd, engine.size = fake_horovod(nccl=22907), 4
    engine.world()
    group = engine.split([[0, 1], [2, 3]])
    engine.split([[0, 1], [2, 3]])  # formed once
    assert engine.settings()["allreduce_ops"] == []  # nothing reduced yet
    engine.allreduce_sum_(torch.ones(2), group)
    settings = engine.settings()
    assert settings["sets_formed"] == [{"sizes": [4], "process_sets": [0]}, {"sizes": [2, 2], "process_sets": [1, 2]}]
    assert (settings["gpu_operations"], settings["allreduce_ops"]) == ("NCCL", ["Gloo"])  # a host tensor: Gloo's ops
    engine.reduced_on.add("cuda")
    assert engine.allreduce_ops() == ["Gloo", "NCCL"]
    engine.hvd.nccl_built = lambda: 0
    assert engine.allreduce_ops() == ["Gloo"] and engine.settings()["gpu_operations"] == "none"

    engine.hvd.nccl_built, engine.reduced_on = (lambda: 22907), {"cuda"}
    record = new_record(
        {
            "strategy": "label_partitioned",
            "procs": 4,
            "classes": [0, 1],
            "dataset": {"name": "digits", "classes": [0, 1]},  # the classes it trained, which the check reads
            "comm": {"largest_group": 2},
            "engine_settings": engine.settings(),
        }
    )
    assert HorovodEngine.gpu_checks(record) == [
        ("horovod nccl", True, "Horovod built with NCCL GPU operations; allreduces over NCCL"),
        ("horovod process sets", True, "P = 4, 2 classes: 2 groups of 2 ranks on process sets [1, 2]"),
    ]


@pytest.mark.parametrize(
    "error, hint",
    [
        (ModuleNotFoundError("No module named 'horovod'"), "; install Horovod with `make setup` (ci/setup.sh: the NCCL build"),
        (
            OSError("libmpi.so.40: cannot open shared object file: No such file or directory"),
            f"; a wheel built elsewhere: export LD_LIBRARY_PATH={Path(sys.prefix) / 'lib'} (its MPI library), or install",
        ),
    ],
)
def test_horovod_that_cannot_be_imported_stops_the_engine_in_one_line(monkeypatch, tmp_path, error, hint):
    import builtins

    from suite.train.engines.horovod import HorovodEngine

    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name == "horovod.torch":
            raise error
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing_import)
    with pytest.raises(RuntimeError) as raised:
        HorovodEngine(HorovodConfig(), tmp_path).start()
    message = str(raised.value)
    assert len(message.splitlines()) == 1 and raised.value.__cause__ is None
    assert message.startswith(f"horovod engine: `import horovod.torch` failed ({type(error).__name__}: {error}){hint}")


@pytest.mark.parametrize(
    "gpu, cuda_built, refused",
    [(True, False, True), (True, True, False), (False, False, False)],  # the CPU build on a GPU; the NCCL build; a CPU
)
def test_horovods_cpu_build_on_a_gpu_stops_the_engine_in_one_line(monkeypatch, tmp_path, gpu, cuda_built, refused):
    """ci/build_horovod.sh's CPU build has no CUDA: a rank that would train on a GPU with it is refused before training
    (Horovod itself would fail at the first allreduce, on a missing function of its library)."""
    from suite.config.own_entries import HOROVOD_NCCL_BUILD
    from suite.train.engines import base, horovod

    monkeypatch.setattr(horovod, "uses_cuda", lambda: gpu)
    monkeypatch.setattr(base, "uses_cuda", lambda: False)  # the base rule's own device choice: this machine's CPU
    engine = horovod.HorovodEngine(HorovodConfig(), tmp_path)
    engine.hvd = types.SimpleNamespace(cuda_built=lambda: cuda_built, rocm_built=lambda: False)
    if not refused:
        assert engine.pick_device() == torch.device("cpu")
        return
    with pytest.raises(RuntimeError) as raised:
        engine.pick_device()
    message = str(raised.value)
    assert len(message.splitlines()) == 1 and message.startswith("horovod engine: this Horovod is the CPU build")
    assert HOROVOD_NCCL_BUILD in message and "SUITE_DEVICE=cpu" in message


# --- DDP and DeepSpeed --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, bucket_mb, first_mb, as_view, static",
    [
        (DDPConfig(), 25, 1, True, False),  # DDP's own buckets: 25 MiB, a first one of 1 MiB
        (DDPConfig(bucket_cap_mb=1.5, gradient_as_bucket_view=False, static_graph=True), 1.5, 1.5, False, True),
    ],
)
def test_ddp_gets_the_runs_settings(solo_gloo_group, config, bucket_mb, first_mb, as_view, static):
    from suite.train.engines.torch_dist import DDPReplica, TorchEngine

    engine = TorchEngine(LaunchInfo("torchrun", 0, 1, 0, 1), config)
    net = nn.Linear(3, 2)
    replica = DDPReplica(net, torch.optim.SGD(net.parameters(), lr=0.1), engine, solo_gloo_group)
    ddp = replica.module
    assert (ddp.bucket_bytes_cap, ddp.gradient_as_bucket_view, ddp.static_graph) == (int(bucket_mb * 2**20), as_view, static)
    assert engine.settings() == {
        "backend": "gloo",
        "bucket_cap_mb": bucket_mb,
        "first_bucket_mb": first_mb,
        "gradient_as_bucket_view": as_view,
        "static_graph": static,
    }


def test_deepspeed_config_turns_on_the_comms_logger_only_when_traced(tmp_path):
    from suite.train.engines.deepspeed import DeepSpeedEngine

    launch = LaunchInfo("torchrun", 0, 2, 0, 2)
    plain = DeepSpeedEngine(launch, 1, {"gradient_clipping": 1.0}).config_for(16, 2)
    assert plain["zero_optimization"] == {"stage": 1} and plain["gradient_clipping"] == 1.0 and "comms_logger" not in plain
    traced = DeepSpeedEngine(launch, 0, None, comms_log_dir=tmp_path).config_for(16, 2)
    assert traced["comms_logger"]["enabled"] and traced["comms_logger"]["prof_all"] and traced["train_batch_size"] == 32


# --- the report's engine comparison --------------------------------------------------------------------------


def record(run_id, engine, images_per_s, digest="d1", label=None, repeat=0, procs=2, strategy="data_parallel", **extra):
    return {
        "run_id": run_id,
        "status": "ok",
        "strategy": strategy,
        "loss": "bce",
        "procs": procs,
        "scaling": "strong",
        "dataset": {"name": "digits"},
        "engine": engine,
        "label": label,
        "repeat": repeat,
        "threads_per_rank": 1,
        "images_per_s": images_per_s,
        "telemetry": {"step_s": 192 / images_per_s, "comm_share": 0.1},
        "replica_digests": [digest, digest],
        "replicas_identical": True,
        "engine_settings": {"cycle_time_ms": 10.0},
        **extra,
    }


def test_engine_comparison_puts_one_strategy_on_several_engines_side_by_side():
    from suite.analysis.report.tables import engine_comparison_table
    from suite.records.results import new_record

    runs = [
        record("ddp-r0", "torch", 300.0),
        record("ddp-r1", "torch", 280.0, repeat=1),
        record("hvd-r0", "horovod", 290.0, engine_settings={"cycle_time_ms": 10.0, "timeline": "/r/horovod-timeline.json"}),
        record("hvd1-r0", "horovod", 200.0, label="cycle1", engine_settings={"cycle_time_ms": 1.0}),
        record("mpi-r0", "mpi", 145.0, digest="d2", engine_settings={}, replicas_identical=False),
        record("alone-p4", "horovod", 500.0, procs=4),  # no other engine at 4 processes: not compared
        record("failed", "torch", 1.0, status="failed"),
    ]
    table = engine_comparison_table([new_record(r) for r in runs]).set_index(["engine", "label"], drop=False)
    assert list(table["engine"]) == ["horovod", "horovod", "mpi", "torch"]  # the Horovod baseline first
    assert set(table["procs"]) == {2}
    hvd, hvd1, mpi, ddp = (table.iloc[i] for i in range(4))
    assert hvd["vs_baseline"] == 1.0 and hvd1["vs_baseline"] == pytest.approx(200 / 290)
    assert ddp["runs"] == 2 and ddp["images_per_s"] == 290.0 and ddp["images_per_s_std"] == pytest.approx(14.142, abs=1e-3)
    assert ddp["vs_baseline"] == pytest.approx(1.0) and ddp["step_s"] == pytest.approx((192 / 300 + 192 / 280) / 2)
    assert (hvd["same_model"], ddp["same_model"], mpi["same_model"]) == (True, True, False)
    assert (ddp["replicas_identical"], mpi["replicas_identical"]) == (True, False)
    assert hvd["settings"] == "cycle_time_ms=10.0, timeline=horovod-timeline.json" and mpi["settings"] == "none"


def test_no_comparison_without_two_engines():
    from suite.analysis.report.tables import engine_comparison_table
    from suite.records.results import new_record

    runs = [record("a", "torch", 1.0), record("b", "torch", 2.0, label="x")]
    assert engine_comparison_table([new_record(r) for r in runs]).empty
