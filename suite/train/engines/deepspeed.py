"""DeepSpeed engine: one ``deepspeed.initialize`` engine per network, ZeRO stage 0 or 1.

The generator and the discriminator each get their own DeepSpeed engine with the run's Adam as
client optimizer and a config generated from the scenario (the ``deepspeed.config`` keys
:mod:`suite.config.engine_configs` allows, checked again here). DeepSpeed's collectives go through
``torch.distributed``, whose functions are wrapped while the engine runs so that payload bytes and
waits are counted like every other engine's; collectives started with ``async_op=True`` are counted
in bytes only. A traced run also writes DeepSpeed's communication log (docs/engine-settings.md).
"""

from __future__ import annotations

import functools
import io
import json
import logging
import os
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch
import torch.distributed as dist

from ...config.engine_configs import DEEPSPEED_MONITOR_DIR, confined_deepspeed_config
from ...config.scenario import Run
from ...records.results import COMMS_LOG, atomic_write_text
from ..launchenv import LaunchInfo
from .base import Group, Replica, uses_cuda
from .torch_dist import TorchEngine

if TYPE_CHECKING:
    from torch import nn


COUNTED = (
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all_single",
)


def _payload(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Bytes of the tensor(s) a collective was handed (the first tensor argument, or a list of them)."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    if torch.is_tensor(first):
        return first.numel() * first.element_size()
    if isinstance(first, (list, tuple)):
        return sum(t.numel() * t.element_size() for t in first if torch.is_tensor(t))
    return 0


class DeepSpeedReplica(Replica):
    def __init__(
        self,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        engine: DeepSpeedEngine,
        group: Group,
        name: str,
        local_batch: int,
    ):
        import deepspeed

        super().__init__(network, optimizer)
        config = engine.config_for(local_batch, group.size, name)
        self.module: Any  # DeepSpeed's engine: backward() and step() of its own
        self.optimizer: Any
        self.module, self.optimizer, _, _ = deepspeed.initialize(model=network, optimizer=optimizer, config=config)
        self.rank, self.zero_stage = group.rank, engine.zero_stage
        self.shared_optimizer = engine.zero_stage == 0  # ZeRO partitions the optimizer state over the ranks

    def load_optimizer_state(self, state: dict) -> None:
        if self.zero_stage == 0:  # the run's own Adam
            return super().load_optimizer_state(state)
        # ZeRO: this rank's partition, and its fp32 master weights exactly as saved
        partitions: list[dict | None] = [None] * (self.rank + 1)
        partitions[self.rank] = state
        self.optimizer.load_state_dict(partitions, load_optimizer_states=True, load_from_fp32_weights=True)

    def zero_grad(self) -> None:
        self.module.zero_grad()

    def backward(self, loss: torch.Tensor) -> None:
        self.module.backward(loss)  # gradients are reduced here, at the accumulation boundary

    def step(self) -> None:
        self.module.step()


class DeepSpeedEngine(TorchEngine):
    """DeepSpeed over torch.distributed (started by torchrun, deepspeed, mpirun, srun or jsrun)."""

    name = "deepspeed"

    @classmethod
    def shared_launch_refusal(cls, run: Run) -> str | None:
        return "the deepspeed engine configures itself once per process, from one run's settings"

    def __init__(
        self,
        launch: LaunchInfo,
        zero_stage: int = 0,
        extra_config: dict | None = None,
        comms_log_dir: Path | None = None,
        monitor_dir: Path | None = None,
    ) -> None:
        super().__init__(launch)
        self.zero_stage, self.extra_config, self.comms_log_dir = zero_stage, extra_config, comms_log_dir
        self.monitor_dir = monitor_dir or Path(DEEPSPEED_MONITOR_DIR)  # where DeepSpeed's CSV monitor writes
        self.config: dict[str, Any] | None = None  # the last config handed to deepspeed.initialize
        self._counting = True

    @classmethod
    def from_run(cls, run: Run, launch: LaunchInfo, run_dir: Path) -> DeepSpeedEngine:
        comms = run_dir if run.trace else None
        return cls(launch, run.deepspeed.zero_stage, run.deepspeed.config, comms, run_dir / DEEPSPEED_MONITOR_DIR)

    def config_for(self, local_batch: int, group_size: int, network: str = "model") -> dict[str, Any]:
        """The DeepSpeed config of one network: generated, with the run's ``deepspeed.config`` on top (confined:
        :func:`suite.config.engine_configs.confined_deepspeed_config`; :class:`ValueError` naming a refused key)."""
        extra = confined_deepspeed_config(self.extra_config, str(self.monitor_dir), network)
        zero = {"stage": self.zero_stage, **extra.pop("zero_optimization", {})}
        self.config = {
            "train_micro_batch_size_per_gpu": local_batch,
            "gradient_accumulation_steps": 1,
            "train_batch_size": local_batch * group_size,
            "steps_per_print": 10**9,
            "zero_optimization": zero,
            "wall_clock_breakdown": False,
            **(
                {"comms_logger": {"enabled": True, "prof_all": True, "verbose": False, "debug": False}}
                if self.comms_log_dir
                else {}
            ),
            **extra,
        }
        return self.config

    def settings(self) -> dict[str, Any]:
        """The backend, the ZeRO stage and the config handed to ``deepspeed.initialize``."""
        return {"backend": dist.get_backend(), "zero_stage": self.zero_stage, "config": self.config}

    def checkpoint_types(self) -> list[type]:
        """ZeRO's optimizer state holds DeepSpeed's loss scaler, its stage and its parameter slices."""
        from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
        from deepspeed.runtime.zero.config import ZeroStageEnum
        from deepspeed.utils.tensor_fragment import fragment_address

        return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]

    def start(self) -> None:
        os.environ.setdefault("DS_ACCELERATOR", "cuda" if uses_cuda() else "cpu")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        for key, value in (("RANK", self.launch.rank), ("WORLD_SIZE", self.launch.size), ("LOCAL_RANK", self.launch.local_rank)):
            os.environ.setdefault(key, str(value))
        import deepspeed

        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        deepspeed.utils.logger.setLevel(logging.WARNING)
        self.rank, self.size = self.launch.rank, self.launch.size
        self.local_rank, self.local_size = self.launch.local_rank, self.launch.local_size
        self.device = self.pick_device()
        deepspeed.init_distributed(dist_backend="nccl" if self.device.type == "cuda" else "gloo")
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.object_group = dist.new_group(backend="gloo") if self.device.type == "cuda" else dist.group.WORLD
        for name in COUNTED:
            if hasattr(dist, name):
                setattr(dist, name, self._counted(getattr(dist, name)))

    def _counted(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self._counting or self.size == 1:  # one rank: nothing crosses a process boundary
                return function(*args, **kwargs)
            start = self.timeline.mark()
            result = function(*args, **kwargs)
            wait = None if kwargs.get("async_op") else (start, self.timeline.mark())
            self.comm.add(_payload(args, kwargs), self.size, wait)
            return result

        return wrapper

    @contextmanager
    def _uncounted(self) -> Iterator[None]:
        self._counting = False
        try:
            yield
        finally:
            self._counting = True

    def split(self, groups: list[list[int]]) -> Group:
        if len(groups) != 1:
            raise ValueError("the deepspeed engine trains one model over all ranks; it has no per-class groups")
        return Group(index=0, ranks=list(groups[0]), rank=self.rank, handle=dist.group.WORLD, host_handle=self.object_group)

    def _max_(self, votes: torch.Tensor, group: Group) -> None:
        with self._uncounted():
            super()._max_(votes, group)

    def replicate(
        self, network: nn.Module, optimizer: torch.optim.Optimizer, group: Group, name: str, local_batch: int | None = None
    ) -> Replica:
        # Also for one rank: the DeepSpeed engine (and its optimizer wrapper) is what is being measured.
        return DeepSpeedReplica(network, optimizer, self, group, name, local_batch or 1)

    def allgather_object(self, obj: Any) -> list[Any]:
        with self._uncounted():
            return super().allgather_object(obj)

    def _write_comms_log(self) -> None:
        """All ranks summarise DeepSpeed's communication log (collective); rank 0 writes it."""
        import deepspeed.comm

        printed = io.StringIO()
        with redirect_stdout(printed):
            summary = deepspeed.comm.log_summary(return_dict=True)
        if self.rank == 0 and self.comms_log_dir is not None:
            path = self.comms_log_dir / COMMS_LOG
            atomic_write_text(path, json.dumps(summary, indent=1, default=str))
            atomic_write_text(path.with_suffix(".txt"), printed.getvalue())

    def shutdown(self) -> None:
        with self._uncounted():
            if self.comms_log_dir and dist.is_initialized():
                self._write_comms_log()
            super().shutdown()
