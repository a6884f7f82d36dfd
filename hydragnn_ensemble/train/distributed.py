"""Data-parallel training across a ``torch.distributed`` process group.

The trial's launcher (the campaign runtime, ``torchrun``, or a test) says who this process is with
an explicit :class:`DistributedContext`; nothing is read from hidden globals. Gradients are summed
with one flat ``all_reduce`` per step (the loss is already divided by the *global* element count,
so the sum is the gradient of the global batch: exactly what one process would compute).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass(frozen=True)
class DistributedContext:
    """Who this process is in the trial: ``rank`` of ``world_size``.

    ``init_method``: a torch.distributed URL (``tcp://host:port`` or ``file:///path``); ``None``
    means ``env://`` (``MASTER_ADDR``/``MASTER_PORT`` set by the launcher). ``backend``: ``gloo``
    (CPU) or ``nccl`` (GPU); ``None`` picks by device. ``local_rank`` picks the GPU (default:
    ``rank`` modulo the visible GPUs).
    """

    rank: int = 0
    world_size: int = 1
    init_method: str | None = None
    backend: str | None = None
    local_rank: int | None = None
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in 0..{self.world_size - 1}, got {self.rank}")

    @classmethod
    def from_master(cls, rank: int, world_size: int, master_addr: str | None,
                    master_port: int | None, **kw) -> "DistributedContext":
        """Context from a master address/port (``tcp://``); ``None`` for both means ``env://``."""
        init = f"tcp://{master_addr}:{master_port}" if master_addr and master_port else None
        return cls(rank=rank, world_size=world_size, init_method=init, **kw)

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class ProcessGroup:
    """Joins (and later leaves) the trial's process group; a no-op for one process."""

    def __init__(self, ctx: DistributedContext, device: torch.device) -> None:
        self.ctx = ctx
        self.device = device
        self._owned = False

    def __enter__(self) -> "ProcessGroup":
        if self.ctx.is_distributed and not dist.is_initialized():
            backend = self.ctx.backend or ("nccl" if self.device.type == "cuda" else "gloo")
            dist.init_process_group(
                backend=backend,
                init_method=self.ctx.init_method or "env://",
                rank=self.ctx.rank,
                world_size=self.ctx.world_size,
                timeout=timedelta(seconds=self.ctx.timeout_s),
            )
            self._owned = True
        return self

    def __exit__(self, *exc) -> None:
        if self._owned and dist.is_initialized():
            dist.destroy_process_group()
            self._owned = False

    # collectives (identity for one process) ------------------------------------------------------
    def all_reduce_sum(self, t: Tensor) -> Tensor:
        if self.ctx.is_distributed:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def all_reduce_max(self, t: Tensor) -> Tensor:
        if self.ctx.is_distributed:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t

    def broadcast_parameters(self, model: nn.Module) -> None:
        """Give every rank rank 0's initial weights (and buffers)."""
        if not self.ctx.is_distributed:
            return
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=0)

    def sum_gradients(self, params: list[nn.Parameter]) -> None:
        """Sum gradients over ranks with one flat all-reduce (missing grads count as zero)."""
        if not self.ctx.is_distributed:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            chunk = flat[offset: offset + n].view_as(p)
            if p.grad is None:
                p.grad = chunk.clone()
            else:
                p.grad.copy_(chunk)
            offset += n
