"""``performance.cuda_graphs``: the whole training step captured once and replayed (suite.train.graphs).

On the CPU the capture is a fake that replays by calling the step again (into the outputs it captured once, under a
dispatch mode that fails on any read back to the host): the graphed trainer must then train eager's model bit for
bit. On a GPU (when there is one) the real capture is compared with eager within the tolerance docs/gpu.md states.
"""

import contextlib
import dataclasses
import inspect
import os
import sys

import pytest
import torch
from test_training import READS, SoloEngine, record_reads
from torch.utils._python_dispatch import TorchDispatchMode

from suite.config.expansion import expand, parse_scenario
from suite.config.plan import TrainingError
from suite.config.scenario import PerformanceConfig, ScenarioError
from suite.gan.data import load_dataset
from suite.gan.divergence import CHECK_EVERY
from suite.gan.losses import get_loss
from suite.measure.telemetry import CommStats, Telemetry
from suite.train import graphs, performance
from suite.train.engines.base import Replica
from suite.train.gan_plan import GanPlan, TrainerHooks, evenly_spaced_steps
from suite.train.progress import PROGRESS_POINTS
from suite.train.training import GanTrainer


class NoHostReads(TorchDispatchMode):
    """Fails where the suite's own code copies a tensor's value to the host (``item``, ``bool``, ``float``, ...).

    (On the CPU, PyTorch's Adam reads its step counter with ``item()``; a captured step's Adam is ``capturable``,
    whose counter stays on the device, so reads from inside PyTorch are not counted, as in test_training.)"""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            caller = sys._getframe(1).f_code.co_filename
            assert f"{os.sep}suite{os.sep}" not in caller, f"the step read a value back to the host in {caller}"
        return func(*args, **(kwargs or {}))


class ReplayByCalling:
    """A capture on the CPU: :meth:`warm` calls the step; :meth:`capture` records it without running it; a replay
    calls it again and copies its losses into the outputs made at capture (a caller that kept another tensor
    would read stale values). ``strict``: replays run under :class:`NoHostReads`."""

    def __init__(self, strict: bool = True):
        self.strict, self.warm_calls, self.captures, self.replays = strict, 0, 0, 0
        self.inputs: graphs.StaticInputs | None = None  # where given: a replay checks they kept their addresses
        self.addresses: dict[str, int] = {}

    def addresses_now(self) -> dict[str, int]:
        return {} if self.inputs is None else {k: v.data_ptr() for k, v in self.inputs._held.items()}

    def warm(self, step):
        self.warm_calls += 1
        return step()

    def capture(self, step):
        self.captures += 1
        self.addresses = self.addresses_now()
        return _Replayed(step, self)


class _Replayed:
    def __init__(self, step, owner):
        self.step, self.owner, self.outputs = step, owner, torch.empty(0)

    def replay(self):
        self.owner.replays += 1
        assert self.owner.addresses_now() == self.owner.addresses, "a static input moved: a graph would read the old one"
        if self.owner.strict:
            with NoHostReads():
                losses = self.step()
        else:
            losses = self.step()
        self.outputs.resize_(losses.shape).copy_(losses)


# --- the runner and its static inputs (fast) ---------------------------------------------------------------------


def _tiny_step(static: graphs.StaticInputs, net: torch.nn.Linear, opt: torch.optim.Optimizer):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = (net(static["x"]) - static["y"]).pow(2).mean()
        loss.backward()
        opt.step()
        return torch.stack([loss.detach(), loss.detach() * 2])

    return step


def _tiny_model():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    return net, torch.optim.Adam(net.parameters(), lr=0.01)


def test_the_step_warms_up_then_is_captured_once_and_replayed_training_the_same_model():
    batches = [(torch.randn(4, 3, generator=torch.Generator().manual_seed(i)), torch.full((4, 1), float(i))) for i in range(7)]
    net, opt = _tiny_model()
    static, capture = graphs.StaticInputs(), ReplayByCalling()
    runner, step = graphs.GraphedStep(capture), None
    outputs = []
    for x, y in batches:
        static.fill(x=x, y=y)
        step = step or _tiny_step(static, net, opt)
        outputs.append(runner(step))
    assert (capture.warm_calls, capture.captures, capture.replays) == (
        graphs.GRAPH_WARMUP_CALLS,
        1,
        7 - graphs.GRAPH_WARMUP_CALLS,
    )
    assert outputs[-1] is outputs[-2] is outputs[graphs.GRAPH_WARMUP_CALLS]  # the capture's outputs, overwritten
    plain, plain_opt = _tiny_model()
    for x, y in batches:
        plain_opt.zero_grad(set_to_none=True)
        loss = (plain(x) - y).pow(2).mean()
        loss.backward()
        plain_opt.step()
    assert torch.equal(plain.weight, net.weight) and torch.equal(plain.bias, net.bias)
    assert outputs[-1].tolist() == [loss.item(), 2 * loss.item()]


def test_the_flop_counting_step_runs_eager_and_a_reset_warms_up_again():
    net, opt = _tiny_model()
    static, capture = graphs.StaticInputs(), ReplayByCalling()
    static.fill(x=torch.ones(2, 3), y=torch.zeros(2, 1))
    runner, step = graphs.GraphedStep(capture, warmup=1), _tiny_step(static, net, opt)
    runner(step, eager=True)
    runner(step, eager=True)  # before capture, eager asks for a warm call whatever the count
    runner(step)
    assert (capture.warm_calls, capture.captures, runner.captures) == (2, 1, 1)
    runner.reset()
    runner(step)
    runner(step)
    assert (capture.warm_calls, capture.captures, capture.replays) == (3, 2, 2)


def test_static_inputs_keep_their_tensors_and_refuse_another_shape():
    static = graphs.StaticInputs()
    image = torch.randn(2, 1, 4, 4).contiguous(memory_format=torch.channels_last)
    static.fill(real=image, labels=None)
    held = static["real"]
    assert held.is_contiguous(memory_format=torch.channels_last) and static.get("labels") is None
    static.fill(real=image * 2)
    assert static["real"] is held and torch.equal(held, image * 2)
    with pytest.raises(RuntimeError, match=r"static input real holds \(2, 1, 4, 4\)"):
        static.fill(real=torch.zeros(3, 1, 4, 4))


def test_a_capture_on_the_cpu_is_refused_naming_the_field():
    with pytest.raises(TrainingError, match=r"^performance\.cuda_graphs: CUDA graphs need a GPU"):
        graphs.CudaGraphs(torch.device("cpu"))


def test_the_cuda_capture_warms_up_on_a_side_stream_then_captures_and_replays(monkeypatch):
    """CudaGraphs against fakes of torch.cuda that log each call, its arguments bound to the real signatures."""
    real = {name: inspect.signature(getattr(torch.cuda, name)) for name in ("current_stream", "stream", "graph")}
    log = []

    def bound(name, *args, **kwargs):
        real[name].bind(*((None,) if name == "graph" else ()), *args, **kwargs)  # graph's self
        log.append((name, *args, *kwargs.values()))

    class Stream:
        def __init__(self, device=None, priority=0):
            self.name = "side" if device is not None else "current"

        def wait_stream(self, other):
            log.append(("wait", self.name, other.name))

    current = Stream()

    class Graph:
        def replay(self):
            log.append(("replay",))

    @contextlib.contextmanager
    def in_stream(stream):
        bound("stream", stream)
        log.append(("enter", stream.name))
        yield
        log.append(("leave", stream.name))

    @contextlib.contextmanager
    def capturing(graph, **kwargs):
        bound("graph", graph, **kwargs)
        yield

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: bound("current_stream", device) or current)
    monkeypatch.setattr(torch.cuda, "stream", in_stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", capturing)
    runner = graphs.GraphedStep(graphs.CudaGraphs(torch.device("cuda", 0)), warmup=1)
    calls = []

    def step():
        calls.append(len(log))
        return torch.ones(2) * len(calls)

    first = runner(step)
    del log[:]
    second, third = runner(step), runner(step)
    assert first.tolist() == [1.0, 1.0] and second is third and second.tolist() == [2.0, 2.0]
    assert len(calls) == 2  # one eager call, one capture; replays do not call the step
    assert log == [("graph", log[0][1], "thread_local"), ("replay",), ("replay",)]
    runner.reset()
    del log[:]
    runner(step)
    device = torch.device("cuda", 0)
    assert log == [
        ("current_stream", device),
        ("wait", "side", "current"),  # the side stream waits for the static inputs' copies
        ("stream", log[2][1]),
        ("enter", "side"),
        ("leave", "side"),
        ("wait", "current", "side"),  # and the current stream for the step
    ]


def test_the_trainer_refuses_what_it_cannot_capture():
    net, opt = _tiny_model()
    plain = Replica(net, opt)

    class Reducing(Replica):
        pass

    graphs.check_capturable((plain, plain), get_loss("bce"), 1)  # nothing to refuse
    for replicas, loss, critics, why in [
        ((plain, Reducing(net, opt)), "bce", 1, "kept in step by Reducing"),
        ((plain, plain), "wgan-gp", 1, "gradient penalty takes a double backward"),
        ((plain, plain), "bce", 2, "2 critic steps per generator step"),
    ]:
        with pytest.raises(TrainingError, match=f"^performance\\.cuda_graphs: .*{why}"):
            graphs.check_capturable(replicas, get_loss(loss), critics)


def test_the_record_states_no_compile_mode_for_the_captured_step():
    assert performance.record(PerformanceConfig(cuda_graphs=True))["compile_mode"] is None
    assert performance.record(PerformanceConfig(cuda_graphs=True))["cuda_graphs"] is True


# --- refused before any rank starts (fast) -------------------------------------------------------------------------


def _scenario(entry: dict, top: dict | None = None):
    spec = {"strategy": "data_parallel", "engine": "torch", "procs": [1], "performance": {"cuda_graphs": True}, **entry}
    return parse_scenario({"name": "t", "train": {"warmup_steps": 3}, "runs": [spec], **(top or {})})


@pytest.mark.parametrize(
    "entry, top, why",
    [
        ({"engine": "mpi"}, None, "the mpi engine reduces gradients outside the captured step"),
        ({"procs": [1, 2]}, None, "at procs 2 the torch engine averages gradients with host-side work every step"),
        ({"loss": "wgan-gp"}, None, "the wgan-gp loss cannot be captured: its gradient penalty takes a double backward"),
        ({"performance": {"cuda_graphs": True, "compile": True}}, None, "turn performance.compile off beside it"),
        ({}, {"performance": {"compile": True}}, "the captured step runs the eager networks"),
        ({}, {"model": {"sync_batchnorm": True}}, "synchronised BatchNorm communicates inside the forward pass"),
    ],
)
def test_cuda_graphs_where_they_cannot_work_are_one_line_naming_the_field(entry, top, why):
    with pytest.raises(ScenarioError) as refused:
        _scenario(entry, top)
    message = str(refused.value)
    assert "runs[0].performance.cuda_graphs: " in message and why in message
    assert "\n" not in message


def test_cuda_graphs_with_too_few_warm_up_steps_to_capture_before_the_window_are_refused():
    with pytest.raises(ScenarioError) as refused:
        _scenario({"train": {"warmup_steps": 2}})
    assert str(refused.value) == (
        "<scenario>: runs[0].train.warmup_steps: 2 with performance.cuda_graphs: the step runs eagerly 2 times, then "
        "is captured; give at least 3 warm-up steps so that the capture is not timed"
    )


@pytest.mark.parametrize(
    "entry",
    [{}, {"strategy": "conditional"}, {"strategy": "label_partitioned"}, {"performance": {"cuda_graphs": True, "bf16": True}}],
)
def test_cuda_graphs_are_accepted_for_one_rank_of_the_shared_trainer(entry):
    run = expand(_scenario(entry))[0]
    assert run.performance.cuda_graphs


# --- the graphed trainer against eager, on the CPU (slow: they train) ----------------------------------------------


def build(perf: dict, *, conditional=False, capture=None, device="cpu", steps=6, batch=8):
    scenario = parse_scenario(
        {
            "name": "t",
            "dataset": {"name": "digits", "image_size": 20},
            "train": {"epochs": 5, "steps": steps, "batch_size": batch, "warmup_steps": 2},
            "metrics": {"enabled": False},
            "runs": [{"strategy": "data_parallel", "engine": "torch"}],
        }
    )
    run = dataclasses.replace(expand(scenario)[0], performance=PerformanceConfig(**perf))
    engine = SoloEngine()
    engine.device = torch.device(device)
    telemetry = Telemetry(engine.device, CommStats())
    data = load_dataset("digits", 20)
    gan = GanPlan("all", data, engine.world(), batch, conditional)
    trainer = GanTrainer(run, engine, gan, telemetry, TrainerHooks(capture=capture))
    if isinstance(capture, ReplayByCalling):
        capture.inputs = trainer._static
    return trainer, telemetry


def trained(trainer, telemetry, warmup=2):
    trainer.warm_up(warmup)
    telemetry.open_window()
    trainer.train()
    return trainer


def states(trainer) -> dict[str, torch.Tensor]:
    """Everything the steps change: weights, BatchNorm statistics, Adam's moments and counters, the losses kept."""
    found = {}
    for name, replica in (("G", trainer.generator), ("D", trainer.discriminator)):
        found.update({f"{name}.{k}": v for k, v in replica.network.state_dict().items()})
        for i, state in enumerate(replica.optimizer.state.values()):
            found.update({f"{name}.adam{i}.{k}": torch.as_tensor(v) for k, v in state.items()})
    found["loss_sums"] = trainer._losses.sums
    return found


@pytest.mark.slow
@pytest.mark.parametrize("conditional", [False, True])
def test_the_graphed_trainer_trains_eagers_model_bit_for_bit(conditional):
    eager = trained(*build({}, conditional=conditional))
    # (a conditional pair's one_hot checks its labels on the host, on a CPU only: not strict there)
    capture = ReplayByCalling(strict=not conditional)
    graphed = trained(*build({"cuda_graphs": True}, conditional=conditional, capture=capture))
    assert graphed.result.steps == eager.result.steps == 6
    assert (capture.warm_calls, capture.captures, capture.replays) == (2, 1, 4)  # the FLOP-counting step is a warm call
    assert graphed.telemetry.flops_per_step == eager.telemetry.flops_per_step
    a, b = states(eager), states(graphed)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    unclocked = [[{k: v for k, v in h.items() if k != "clock_s"} for h in t.result.history] for t in (eager, graphed)]
    assert unclocked[0] == unclocked[1] and len(unclocked[0]) > 1


@pytest.mark.slow
def test_a_checkpoint_loaded_into_a_graphed_trainer_drops_the_capture_and_training_goes_on_as_eager():
    eager = trained(*build({}, steps=8))
    capture = ReplayByCalling()
    graphed, telemetry = build({"cuda_graphs": True}, capture=capture, steps=8)
    graphed.warm_up(2)
    telemetry.open_window()
    graphed.open_window()
    graphed.advance()
    graphed.advance()  # step 3 captured and replayed, step 4 replayed
    assert graphed._graphed.captured is not None
    state = graphed.state_dict()
    graphed.load_state_dict(state, state["shared"])  # new optimizer state tensors: a capture would miss them
    assert graphed._graphed.captured is None and graphed._graphed.calls == 0
    graphed.train()
    assert graphed.result.steps == 8 and (capture.warm_calls, capture.captures, capture.replays) == (4, 2, 4)  # 5, 6 warm again
    a, b = states(eager), states(graphed)
    for key in a:
        if key != "loss_sums":
            assert torch.equal(a[key], b[key]), key


@pytest.mark.slow
def test_the_graphed_trainer_reads_losses_at_check_points_only(monkeypatch):
    capture = ReplayByCalling()
    trainer, telemetry = build({"cuda_graphs": True}, capture=capture, steps=24, batch=4)
    trainer.warm_up(2)
    telemetry.open_window()
    reads = record_reads(monkeypatch, trainer)
    trainer.train()
    assert trainer.result.steps == 24 and capture.replays == 24 - graphs.GRAPH_WARMUP_CALLS
    progress = {2 + k for k in evenly_spaced_steps(22, PROGRESS_POINTS)}
    checks = progress | {s for s in range(3, 25) if s % CHECK_EVERY == 0}
    assert reads and set(reads) <= checks, f"device reads ({', '.join(READS)}) after steps {sorted(set(reads) - checks)}"
    assert len(reads) == len(progress) + len(checks)


# --- on a GPU -------------------------------------------------------------------------------------------------------

GPU_TOLERANCE = 1e-3
"""Largest difference of any weight, statistic or Adam moment from eager's after 6 steps on a GPU, and the relative
difference of the mean losses (docs/gpu.md)."""
GPU_MEDIAN_TOLERANCE = 1e-6
"""... and of the median entry of each tensor: a few weights may flip where Adam scales a near-zero gradient."""


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the tests above run the same step on the CPU)")
def test_on_a_gpu_the_captured_step_trains_eagers_model_within_the_tolerance():
    eager = trained(*build({}, device="cuda", batch=64))
    graphed = trained(*build({"cuda_graphs": True}, device="cuda", batch=64))
    assert graphed._graphed.captures == 1 and graphed._graphed.captured is not None
    uncaptured, telemetry = build({"cuda_graphs": True}, device="cuda", batch=64)
    uncaptured._graphed.warmup = 10**9  # the same step and capturable Adam, never captured
    uncaptured = trained(uncaptured, telemetry)
    assert uncaptured._graphed.captured is None
    for e, g in zip(eager.result.history, graphed.result.history):  # the mean losses at each progress point
        assert e["d_loss"] == pytest.approx(g["d_loss"], rel=GPU_TOLERANCE)
        assert e["g_loss"] == pytest.approx(g["g_loss"], rel=GPU_TOLERANCE)
    for other in (eager, uncaptured):
        a, b = states(other), states(graphed)
        for key in a:
            if a[key].is_floating_point():
                difference = (a[key].to(b[key].device) - b[key]).abs().flatten()
                assert difference.max() <= GPU_TOLERANCE and difference.median() <= GPU_MEDIAN_TOLERANCE, key
