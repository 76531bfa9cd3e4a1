"""torch.distributed engine: DistributedDataParallel, ``new_group`` for sub-communicators.

Backend: NCCL on GPUs, Gloo on CPUs. DDP overlaps its gradient allreduce with the backward pass; a
communication hook counts the bucket bytes and marks the wait that computation did not hide, on a GPU
with CUDA events on the device's clock (host timestamps around an asynchronous NCCL call would read
near zero). DDP's settings come from the run's ``ddp`` section (:func:`ddp_arguments`); a null field
takes the suite's default, :data:`DDP_DEFAULTS`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ...config.scenario import DDPConfig, Run
from ..launchenv import LaunchInfo
from .base import Engine, Group, Replica, tensor_bytes

if TYPE_CHECKING:
    from ...measure.timelines import CudaTimeline, HostTimeline


DDP_DEFAULTS = {"bucket_cap_mb": None, "gradient_as_bucket_view": True, "static_graph": False}
"""The suite's DDP settings where a run sets none: DDP's own buckets, gradients as bucket views (docs/engine-settings.md)."""
DDP_BUCKET_CAP_MB = 25.0
"""DDP's bucket size when none is given (its first bucket is smaller; a size given applies to every bucket)."""


def ddp_arguments(config: DDPConfig) -> dict[str, Any]:
    """Keyword arguments of ``DistributedDataParallel`` for ``config`` (null fields: :data:`DDP_DEFAULTS`)."""
    return {name: default if getattr(config, name) is None else getattr(config, name) for name, default in DDP_DEFAULTS.items()}


class _HookState:
    """State of :func:`_counting_allreduce`: bytes handed to the network and timeline marks."""

    def __init__(self, group: Group, timeline: HostTimeline | CudaTimeline):
        self.pg, self.size, self.timeline = group.handle, group.size, timeline
        self.nbytes = 0
        self.last_launch = None
        self.last_done = None

    def collect(self) -> tuple[int, tuple | None]:
        """Bytes since the last call, and the wait from the last launch to the last completion."""
        nbytes, wait = self.nbytes, None
        if self.last_launch is not None and self.last_done is not None:
            wait = (self.last_launch, self.last_done)
        self.nbytes, self.last_launch, self.last_done = 0, None, None
        return nbytes, wait


def _counting_allreduce(state, bucket):  # type: ignore[no-untyped-def]  # no annotations: DDP checks them, and ours are postponed strings
    """DDP communication hook: average the bucket like DDP's default hook, counting and timing it."""
    buffer = bucket.buffer()
    state.nbytes += buffer.numel() * buffer.element_size()
    buffer.div_(state.size)
    state.last_launch = state.timeline.mark()
    future = dist.all_reduce(buffer, group=state.pg, async_op=True).get_future()

    def done(fut: Any) -> Any:
        state.last_done = state.timeline.mark()
        return fut.value()[0]

    return future.then(done)


class DDPReplica(Replica):
    def __init__(self, network: nn.Module, optimizer: torch.optim.Optimizer, engine: "TorchEngine", group: Group):
        super().__init__(network, optimizer)
        self.engine = engine
        device_ids = [engine.device.index] if engine.device.type == "cuda" else None
        start = engine.timeline.mark()
        # Buffers (BatchNorm statistics) stay per rank, as with Horovod's DistributedOptimizer.
        # DDP's constructor broadcasts the module's state from the group's first rank: counted here.
        self.module = DistributedDataParallel(
            network, device_ids=device_ids, process_group=group.handle, broadcast_buffers=False, **ddp_arguments(engine.ddp)
        )
        engine.comm.add(tensor_bytes(network.state_dict().values()), group.size, (start, engine.timeline.mark()))
        self.hook = _HookState(group, engine.timeline)
        self.module.register_comm_hook(self.hook, _counting_allreduce)

    def step(self) -> None:
        nbytes, wait = self.hook.collect()
        if nbytes:
            self.engine.comm.add(nbytes, self.hook.size, wait)
        self.optimizer.step()


class TorchEngine(Engine):
    """torch.distributed with DDP; started by torchrun (or any launcher, see suite.train.launchenv)."""

    name = "torch"

    def __init__(self, launch: LaunchInfo, ddp: DDPConfig | None = None) -> None:
        super().__init__()
        self.launch, self.ddp = launch, ddp or DDPConfig()

    @classmethod
    def from_run(cls, run: Run, launch: LaunchInfo, run_dir: Path) -> TorchEngine:
        return cls(launch, run.ddp)

    def start(self) -> None:
        self.rank, self.size = self.launch.rank, self.launch.size
        self.local_rank, self.local_size = self.launch.local_rank, self.launch.local_size
        self.device = self.pick_device()
        # torchrun sets these; other launchers (mpirun, srun, jsrun) rely on the run's own values.
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, rank=self.rank, world_size=self.size, timeout=timedelta(minutes=30))
        # Objects travel over Gloo even when tensors use NCCL.
        self.object_group = dist.new_group(backend="gloo") if backend == "nccl" else dist.group.WORLD

    def settings(self) -> dict[str, Any]:
        """The backend, DDP's arguments (:func:`ddp_arguments`) and the bucket sizes they give."""
        arguments = ddp_arguments(self.ddp)
        cap = arguments["bucket_cap_mb"]
        return {
            "backend": dist.get_backend(),
            **arguments,
            "bucket_cap_mb": cap or DDP_BUCKET_CAP_MB,
            "first_bucket_mb": dist._DEFAULT_FIRST_BUCKET_BYTES / 2**20 if cap is None else cap,
        }

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.barrier(group=self.object_group)
            dist.destroy_process_group()

    def split(self, groups: list[list[int]]) -> Group:
        def new_handle(ranks: list[int]) -> Any:
            return dist.new_group(ranks) if len(groups) > 1 else dist.group.WORLD

        def new_host_handle(ranks: list[int]) -> Any:  # NCCL groups take device tensors only: agree over Gloo
            return dist.new_group(ranks, backend="gloo") if len(groups) > 1 else self.object_group

        return self._split_with(groups, new_handle, new_host_handle if dist.get_backend() == "nccl" else None)

    def _max_(self, votes: torch.Tensor, group: Group) -> None:
        dist.all_reduce(votes, op=dist.ReduceOp.MAX, group=group.host_handle)

    def _replicate(self, network: nn.Module, optimizer: torch.optim.Optimizer, group: Group, name: str) -> Replica:
        return DDPReplica(network, optimizer, self, group)

    def _allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> None:
        dist.all_reduce(tensor, group=group.handle)

    def allgather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.size
        dist.all_gather_object(gathered, obj, group=self.object_group)
        return gathered

    def gather_object(self, obj: Any) -> list[Any] | None:
        gathered: list[Any] | None = [None] * self.size if self.rank == 0 else None
        dist.gather_object(obj, gathered, dst=0, group=self.object_group)
        return gathered
