"""BatchNorm synchronised over a data-parallel group, on any engine.

``model.sync_batchnorm: true`` makes every BatchNorm layer normalise over the group's whole
batch rather than each rank's shard. The statistics are gathered with one differentiable
allreduce of (sum, sum of squares, count): the gradient of a sum replicated on every rank is
the sum of the ranks' gradients, so the backward pass is one more allreduce of the same shape.
Only the engine's plain ``allreduce_sum_`` is needed, so Horovod, torch.distributed and MPI
share this code. On a group of one rank it computes exactly what BatchNorm2d computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

if TYPE_CHECKING:
    from .engines.base import Engine, Group

M = TypeVar("M", bound=nn.Module)


class _AllreduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, engine: Engine, group: Group) -> torch.Tensor:
        ctx.engine, ctx.group = engine, group
        out = tensor.clone()
        engine.allreduce_sum_(out, group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        # The backward is the same allreduce, applied through this Function again so that it is
        # itself differentiable: the WGAN-GP penalty differentiates through it a second time.
        return _AllreduceSum.apply(grad, ctx.engine, ctx.group), None, None


class SyncBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d whose batch statistics cover every rank of ``group``."""

    def __init__(self, source: nn.BatchNorm2d, engine: Engine, group: Group):
        super().__init__(source.num_features, source.eps, source.momentum, source.affine, source.track_running_stats)
        self.load_state_dict(source.state_dict())
        self.engine, self.group = engine, group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        count = torch.tensor([x.numel() / x.shape[1]], dtype=x.dtype, device=x.device)
        local = torch.cat([x.sum(dim=(0, 2, 3)), (x * x).sum(dim=(0, 2, 3)), count])
        total = _AllreduceSum.apply(local, self.engine, self.group)
        c = self.num_features
        n = total[2 * c]
        mean = total[:c] / n
        var = (total[c : 2 * c] / n - mean * mean).clamp_min(0)
        if self.track_running_stats:
            assert self.running_mean is not None and self.running_var is not None and self.num_batches_tracked is not None
            assert self.momentum is not None  # BatchNorm2d's cumulative average (momentum None) is not supported
            with torch.no_grad():
                self.num_batches_tracked += 1
                unbiased = var * n / (n - 1).clamp_min(1)
                self.running_mean.lerp_(mean.detach(), self.momentum)
                self.running_var.lerp_(unbiased.detach(), self.momentum)
        y = (x - mean[None, :, None, None]) * torch.rsqrt(var[None, :, None, None] + self.eps)
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y


def convert_sync_batchnorm(module: M, engine: Engine, group: Group) -> M:
    """Replace every BatchNorm2d in ``module`` by :class:`SyncBatchNorm2d` over ``group``."""
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d) and not isinstance(child, SyncBatchNorm2d):
            setattr(module, name, SyncBatchNorm2d(child, engine, group))
        else:
            convert_sync_batchnorm(child, engine, group)
    return module
