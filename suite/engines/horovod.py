"""Horovod engine: ``DistributedOptimizer`` over process sets (the suite's baseline engine).

Gradients are allreduced by Horovod's background thread as they become ready during the
backward pass; the time a rank then spends in ``optimizer.synchronize()`` is the
communication it waits for. On a GPU the host first waits for the backward pass to finish on
the device (Horovod's ``synchronize()`` blocks the host anyway), so the wait timed is
communication only, not backward kernels still running. Groups are dynamic process sets, registered by every rank in the
same order. Every rank calls ``hvd.join()`` before shutting down, so a group that finishes
early does not shut Horovod down under a group still training.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .base import Engine, Group, Replica, tensor_bytes


class HorovodReplica(Replica):
    def __init__(self, network: nn.Module, optimizer: torch.optim.Optimizer, engine: "HorovodEngine", group: Group, name: str):
        import horovod.torch as hvd

        super().__init__(network, optimizer)
        self.engine, self.group_size = engine, group.size
        start = engine.timeline.mark()
        state = network.state_dict()
        for key, tensor in state.items():  # start from the group's first rank
            hvd.broadcast_(tensor, root_rank=group.ranks[0], name=f"init.{name}.{key}", process_set=group.handle)
        engine.comm.add(tensor_bytes(state.values()), group.size, (start, engine.timeline.mark()))
        self.params = [p for p in network.parameters() if p.requires_grad]
        self.optimizer = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=[(f"{name}.{n}", p) for n, p in network.named_parameters()],
            op=hvd.Average,
            process_set=group.handle,
        )

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()  # Horovod's wrapper takes no set_to_none (it sets None itself)

    def step(self) -> None:
        timeline = self.engine.timeline
        backward_done = timeline.mark()
        timeline.wait(backward_done)
        self.optimizer.synchronize()
        grads = tensor_bytes(p.grad for p in self.params if p.grad is not None)
        self.engine.comm.add(grads, self.group_size, (backward_done, timeline.mark()))
        with self.optimizer.skip_synchronize():
            self.optimizer.step()


class HorovodEngine(Engine):
    name = "horovod"

    def start(self) -> None:
        import horovod.torch as hvd

        self.hvd = hvd
        hvd.init(process_sets="dynamic")
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self.device = self.pick_device()

    def shutdown(self) -> None:
        self.hvd.join()
        self.hvd.shutdown()

    def split(self, groups: list[list[int]]) -> Group:
        def new_handle(ranks: list[int]):
            if len(groups) == 1 and len(ranks) == self.size:
                return self.hvd.global_process_set
            return self.hvd.add_process_set(ranks)

        return self._split_with(groups, new_handle)

    def _replicate(self, network, optimizer, group, name) -> Replica:
        return HorovodReplica(network, optimizer, self, group, name)

    def _allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> None:
        self.hvd.allreduce_(tensor, op=self.hvd.Sum, process_set=group.handle)

    def _max_(self, votes: torch.Tensor, group: Group) -> None:
        # a host tensor: Horovod runs it on its CPU path even where gradients go through NCCL
        self.hvd.allreduce_(votes, op=self.hvd.Max, process_set=group.handle)

    def allgather_object(self, obj: Any) -> list[Any]:
        # one name on every rank: Horovod names it by the object's type otherwise, and ranks handing
        # different types (a plan on rank 0, None elsewhere) would wait for each other for ever
        return self.hvd.allgather_object(obj, name="suite.object")
