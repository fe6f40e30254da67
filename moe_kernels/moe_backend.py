"""The Triton kernels as ``training.model.moe``'s four steps (same signatures as its torch backend).

``training.model.moe.get_backend("triton")`` builds its ``MoEBackend`` from ``steps()``; the only
adaptation is that the layer's ``route`` returns (probs, indices, scores): the kernel's
per-expert counts are dropped there because ``permute`` returns them for the bias update.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from moe_kernels import grouped_gemm, permute, router
from moe_kernels.runtime import unavailable_reason


def route(
    logits: torch.Tensor,
    topk: int,
    score_function: str = "sigmoid",
    expert_bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
    scaling_factor: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gates, ids, scores, _ = router.route(
        logits, topk, score_function, expert_bias, num_groups, group_topk, scaling_factor
    )
    return gates, ids, scores


def steps() -> tuple[Callable, Callable, Callable, Callable]:
    """(route, permute, experts, unpermute) for ``training.model.moe.MoEBackend``."""
    return route, permute.permute, grouped_gemm.expert_ffn, permute.unpermute


__all__ = ["route", "steps", "unavailable_reason"]
