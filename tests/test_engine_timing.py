"""Where each engine marks communication waits, checked with a fake device timeline.

On a GPU the marks are CUDA events, read only after the host waited for them; the fake below
behaves the same way (reading an unwaited mark fails) and records the order of events, so these
tests check the GPU code paths' logic on a CPU: what is waited for before a blocking exchange,
and which interval is recorded as the wait.
"""

import torch
from torch import nn

from suite.measure.timelines import HostTimeline
from suite.train.engines.base import Group
from suite.train.launchenv import LaunchInfo


class RecordingTimeline(HostTimeline):
    on_device = True

    def __init__(self, log):
        self.log, self.count = log, 0

    def mark(self):
        self.count += 1
        self.log.append(f"mark{self.count}")
        return self.count

    def wait(self, mark):
        self.log.append(f"wait{mark}")


class FakeComm:
    """An mpi4py communicator of two ranks whose collectives only log that they ran."""

    def __init__(self, log):
        self.log = log

    def Get_size(self):
        return 2

    def Bcast(self, buffer, root=0):
        self.log.append("bcast")

    def Allreduce(self, sendbuf, recvbuf, op=None):
        self.log.append("allreduce")


def test_mpi_waits_for_the_backward_pass_before_timing_the_allreduce():
    from suite.train.engines.mpi import MPIEngine, MPIReplica

    log = []
    engine = MPIEngine()
    engine.timeline = RecordingTimeline(log)
    net = nn.Linear(3, 2)
    replica = MPIReplica(net, torch.optim.SGD(net.parameters(), lr=0.1), engine, Group(0, [0, 1], 0, FakeComm(log)))
    engine.comm.take_waits()
    log.clear()
    net(torch.ones(1, 3)).sum().backward()
    replica.step()
    # the host waits for the device to finish the backward pass, then exchanges; the wait runs between the two marks
    assert log == ["mark3", "wait3", "allreduce", "mark4"]  # marks 1 and 2 timed the initial broadcast
    assert engine.comm.take_waits() == [(3, 4)] and engine.comm.bytes > 0


def test_horovod_waits_for_the_backward_pass_before_synchronize():
    from suite.train.engines.horovod import HorovodReplica

    log = []

    class Engine:
        timeline = RecordingTimeline(log)
        reduced_on: set[str] = set()

        class comm:
            waits = []

            @classmethod
            def add(cls, nbytes, size, wait):
                cls.waits.append(wait)

    class Optimizer:
        def synchronize(self):
            log.append("synchronize")

        def skip_synchronize(self):
            return torch.autograd.grad_mode.no_grad()

        def step(self):
            log.append("step")

    replica = HorovodReplica.__new__(HorovodReplica)  # no Horovod needed: only step() is under test
    replica.engine, replica.group_size, replica.params, replica.optimizer = Engine, 2, [], Optimizer()
    replica.step()
    assert log == ["mark1", "wait1", "synchronize", "mark2", "step"]
    assert Engine.comm.waits == [(1, 2)]


def test_ddp_hook_marks_the_last_launch_and_the_last_completion(solo_gloo_group):
    from suite.train.engines.torch_dist import _counting_allreduce, _HookState

    log = []
    state = _HookState(solo_gloo_group, RecordingTimeline(log))

    class Bucket:
        def __init__(self, n):
            self.tensor = torch.ones(n)

        def buffer(self):
            return self.tensor

    futures = []
    for n in (4, 6):  # one bucket at a time, so that the order of the marks is known
        futures.append(_counting_allreduce(state, Bucket(n)))
        futures[-1].wait()
    nbytes, wait = state.collect()
    assert nbytes == 10 * 4
    # marks 1 and 3 are the launches (on the stream that ran the backward pass), 2 and 4 the completions
    assert wait == (3, 4) and log == ["mark1", "mark2", "mark3", "mark4"]
    assert state.collect() == (0, None)  # collected once
    assert torch.equal(futures[1].value(), torch.ones(6))  # averaged over a group of one: unchanged


def test_deepspeed_counts_async_collectives_in_bytes_only():
    from suite.train.engines.deepspeed import DeepSpeedEngine

    log = []
    engine = DeepSpeedEngine(LaunchInfo("torchrun", 0, 2, 0, 2))
    engine.size, engine.timeline = 2, RecordingTimeline(log)
    counted = engine._counted(lambda tensor, async_op=False: log.append("collective"))
    counted(torch.ones(8))
    counted(torch.ones(8), async_op=True)
    assert engine.comm.bytes == 64 and engine.comm.take_waits() == [(1, 2)]
    assert log == ["mark1", "collective", "mark2", "mark3", "collective"]
