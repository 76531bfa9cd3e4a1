"""The ``performance`` settings (compile, cuda_graphs, channels_last, bf16): validation, the device check
before any rank starts, what the record states, and what each does to the trained model."""

import dataclasses
import functools

import pytest
import torch
from test_training import make_trainer

from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import PerformanceConfig, ScenarioError
from suite.config.validation import device_problem
from suite.running.commands import LaunchError
from suite.running.preflight import check_devices
from suite.train import performance


def scenario(perf=None, **entry):
    spec = {"strategy": "data_parallel", "engine": "torch", **entry}
    # three warm-up steps: a captured step is captured after two eager ones, before the window
    return parse_scenario({"name": "t", "train": {"warmup_steps": 3}, "performance": perf or {}, "runs": [spec]})


def test_a_run_takes_the_scenarios_settings_with_its_own_on_top():
    run = expand(scenario({"compile": True, "bf16": True}, performance={"bf16": False, "channels_last": True}))[0]
    assert run.performance == PerformanceConfig(compile=True, cuda_graphs=None, channels_last=True, bf16=False)
    assert performance.record(run.performance) == {
        "compile": True,
        "cuda_graphs": False,
        "channels_last": True,
        "bf16": False,
        "compile_mode": "default",
    }
    assert performance.record(PerformanceConfig(cuda_graphs=True))["compile_mode"] is None  # the step's own graphs
    assert performance.record(PerformanceConfig())["compile_mode"] is None


@pytest.mark.parametrize(
    "perf, entry, message",
    [
        (
            {"cuda_graphs": True},
            {"engine": "horovod"},
            "runs[0].performance.cuda_graphs: the horovod engine reduces gradients outside the captured step",
        ),
        (
            {},
            {"strategy": "cellular", "engine": "mpi", "grid": [1, 1], "performance": {"compile": True}},
            "runs[0].performance.compile: the cellular strategy trains populations",
        ),
    ],
)
def test_settings_a_strategy_or_engine_cannot_honour_are_refused_naming_the_field(perf, entry, message):
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        scenario(perf, **entry)


def test_cuda_graphs_refuse_synchronised_batchnorm():
    with pytest.raises(ScenarioError, match=r"runs\[0\]\.performance\.cuda_graphs: synchronised BatchNorm"):
        parse_scenario(
            {
                "name": "t",
                "model": {"sync_batchnorm": True},
                "runs": [{"strategy": "data_parallel", "engine": "torch", "performance": {"cuda_graphs": True}}],
            }
        )


def test_the_device_check_names_the_setting_and_why():
    assert device_problem(PerformanceConfig(cuda_graphs=True), on_gpu=True, compiler=None) is None
    field, why = device_problem(PerformanceConfig(cuda_graphs=True), on_gpu=False, compiler="c++")
    assert field == "performance.cuda_graphs" and "need a GPU" in why
    field, why = device_problem(PerformanceConfig(compile=True), on_gpu=False, compiler=None)
    assert field == "performance.compile" and "C++ compiler" in why
    assert device_problem(PerformanceConfig(compile=True), on_gpu=False, compiler="g++") is None


def test_cuda_graphs_on_the_cpu_stop_the_sweep_before_any_rank_starts(monkeypatch):
    monkeypatch.setenv("SUITE_DEVICE", "cpu")
    runs = expand(scenario(performance={"cuda_graphs": True}, procs=[1]))
    with pytest.raises(LaunchError, match=r"^data_parallel-bce-torch-p1-r0: performance\.cuda_graphs: CUDA graphs need a GPU"):
        check_devices(runs)
    check_devices(expand(scenario()))  # nothing asked: nothing to refuse


def trained(perf: dict, monkeypatch, steps: int = 3) -> dict[str, torch.Tensor]:
    monkeypatch.setattr("test_training.expand", lambda s: [_with(r, perf) for r in expand(s)])
    trainer, _ = make_trainer(steps=steps, warmup=0, batch=16)
    trainer.train()
    return trainer, trainer.generator.network.state_dict()


def _with(run, perf):
    return dataclasses.replace(run, performance=PerformanceConfig(**perf))


@pytest.mark.slow
def test_compiled_steps_train_the_same_model_as_eager(monkeypatch):
    """Compiled forward and backward passes give eager's model bit for bit (aot_eager: the same aten ops;
    Inductor's fused kernels agree up to float32 rounding, docs/gpu.md)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    _, eager = trained({}, monkeypatch)
    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    trainer, compiled = trained({"compile": True}, monkeypatch)
    assert isinstance(trainer._compiled[0], torch._dynamo.eval_frame.OptimizedModule)
    assert counters["stats"]["unique_graphs"] >= 2  # the steps after the FLOP-counting one ran compiled
    assert eager.keys() == compiled.keys()
    for name, tensor in eager.items():
        assert torch.equal(tensor, compiled[name]), name


@pytest.mark.slow
def test_channels_last_and_bf16_change_the_layout_and_the_precision(monkeypatch):
    trainer, _ = trained({"channels_last": True, "bf16": True}, monkeypatch, steps=1)
    d = trainer.discriminator.network
    conv = next(p for p in d.parameters() if p.dim() == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last)
    x = performance.images(torch.randn(4, 1, 20, 20), trainer.run.performance)
    assert x.is_contiguous(memory_format=torch.channels_last)
    with trainer._autocast():
        assert d(x, None).dtype == torch.bfloat16
    assert d(x, None).dtype == torch.float32
