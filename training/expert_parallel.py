"""Expert-parallel token exchange: ``all_to_all`` dispatch to the ranks owning each expert and back.

Rank r of an expert-parallel group of size P owns experts [r*El, (r+1)*El). Every rank routes
its own tokens with the (replicated) router and permutes them expert-major (``moe.permute``),
so the rows bound for each rank are already contiguous. ``dispatch`` exchanges the per-expert
counts, then the rows; received rows arrive ordered (source rank, local expert) and are
regrouped expert-major for the grouped GEMM. ``combine`` undoes both. Both are differentiable
(the backward of an all_to_all is the all_to_all with the splits swapped), so the layer trains
under expert parallelism and gives the single-process result (tested over 2 gloo ranks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        return _AllToAll.apply(grad.contiguous(), in_splits, out_splits, ctx.group), None, None, None


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    return _AllToAll.apply(x, out_splits, in_splits, group)


@dataclass
class DispatchHandle:
    send_splits: list[int]
    recv_splits: list[int]
    regroup: torch.Tensor  # received row i (source-major) goes to expert-major position regroup^-1
    group: object


def dispatch(
    x_perm: torch.Tensor, tokens_per_expert: torch.Tensor, num_local: int, group
) -> tuple[torch.Tensor, torch.Tensor, DispatchHandle]:
    """Send expert-major rows to their experts' ranks. Returns this rank's rows for its local
    experts (expert-major), the count per local expert, and a handle for ``combine``."""
    P = dist.get_world_size(group)
    counts = tokens_per_expert.to(torch.int64).view(P, num_local)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts.contiguous(), group=group)  # [source, local expert]
    send_splits = counts.sum(1).tolist()
    recv_splits = recv_counts.sum(1).tolist()
    x_recv = all_to_all(x_perm, recv_splits, send_splits, group)
    # row j of x_recv belongs to (source s, local expert e); sort by (e, s), stably
    seg = torch.arange(P * num_local).repeat_interleave(recv_counts.reshape(-1))
    source, expert = seg // num_local, seg % num_local
    regroup = torch.argsort(expert * P + source, stable=True)
    handle = DispatchHandle(send_splits, recv_splits, regroup, group)
    return x_recv[regroup], recv_counts.sum(0), handle


def combine(y_local: torch.Tensor, handle: DispatchHandle) -> torch.Tensor:
    """Return expert outputs to the ranks their tokens came from, in the sender's row order."""
    back = torch.empty_like(handle.regroup)
    back[handle.regroup] = torch.arange(handle.regroup.numel())
    return all_to_all(y_local[back], handle.send_splits, handle.recv_splits, handle.group)
