"""mpi4py engine: ``Comm.Split`` groups and explicit gradient allreduce (paper 000's tool).

Gradients are flattened into one buffer, summed with ``Allreduce`` and divided by the group
size after each backward pass; nothing overlaps, so all of that time is communication wait.
CUDA tensors are staged through host memory, which works with any MPI build; the host first
waits for the backward pass on the device, so the wait timed is the copy and the exchange.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from ..flat import flatten, unflatten_
from .base import Engine, Group, Replica, tensor_bytes


def _flat(tensors: Sequence[torch.Tensor]) -> np.ndarray:
    """A new host buffer holding the tensors (MPI reads and writes it in place)."""
    return flatten(tensors).numpy()


def _unflat_(tensors: Sequence[torch.Tensor], flat: np.ndarray) -> None:
    unflatten_(tensors, torch.from_numpy(flat))


class MPIReplica(Replica):
    def __init__(self, network: nn.Module, optimizer: torch.optim.Optimizer, engine: "MPIEngine", group: Group):
        super().__init__(network, optimizer)
        self.engine, self.comm = engine, group.handle
        self.params = [p for p in network.parameters() if p.requires_grad]
        start = engine.timeline.mark()
        with torch.no_grad():  # start from group rank 0's weights
            flat = _flat(self.params)
            self.comm.Bcast(flat, root=0)
            _unflat_(self.params, flat)
        engine.comm.add(flat.nbytes, group.size, (start, engine.timeline.mark()))

    def step(self) -> None:
        from mpi4py import MPI

        timeline = self.engine.timeline
        start = timeline.mark()
        timeline.wait(start)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = _flat(grads)
        self.comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
        flat /= self.comm.Get_size()
        for p, g in zip(self.params, grads):
            if p.grad is None:
                p.grad = g
        _unflat_(grads, flat)  # each p.grad is its entry of grads
        self.engine.comm.add(tensor_bytes(grads), self.comm.Get_size(), (start, timeline.mark()))
        self.optimizer.step()


class MPIEngine(Engine):
    """Plain MPI through mpi4py; also the engine of the cellular strategy's Cartesian grid."""

    name = "mpi"

    def start(self) -> None:
        from mpi4py import MPI

        self.world_comm = MPI.COMM_WORLD
        self.rank, self.size = self.world_comm.Get_rank(), self.world_comm.Get_size()
        local = self.world_comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()
        self.device = self.pick_device()

    def shutdown(self) -> None:
        self.world_comm.Barrier()

    def abort(self, code: int = 1) -> None:
        # MPI: MPI_Abort ends every rank of the job, under any launcher (mpirun, srun, jsrun)
        self.world_comm.Abort(code)

    def cartesian(self, dims: Sequence[int]) -> Any:
        return self.world_comm.Create_cart(dims=list(dims), periods=[True] * len(dims), reorder=False)

    def split(self, groups: list[list[int]]) -> Group:
        index = next(i for i, ranks in enumerate(groups) if self.rank in ranks)
        ranks = groups[index]
        comm = self.world_comm.Split(color=index, key=ranks.index(self.rank))
        return Group(index=index, ranks=ranks, rank=comm.Get_rank(), handle=comm)

    def _replicate(self, network: nn.Module, optimizer: torch.optim.Optimizer, group: Group, name: str) -> Replica:
        return MPIReplica(network, optimizer, self, group)

    def _allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> None:
        from mpi4py import MPI

        flat = _flat([tensor])
        group.handle.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
        with torch.no_grad():
            _unflat_([tensor], flat)

    def _max_(self, votes: torch.Tensor, group: Group) -> None:
        from mpi4py import MPI

        group.handle.Allreduce(MPI.IN_PLACE, votes.numpy(), op=MPI.MAX)

    def allgather_object(self, obj: Any) -> list[Any]:
        return self.world_comm.allgather(obj)

    def gather_object(self, obj: Any) -> list[Any] | None:
        return self.world_comm.gather(obj, root=0)  # only rank 0 receives (cellular's generators)
