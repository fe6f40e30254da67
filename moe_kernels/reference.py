"""Pure-torch references for every MoE kernel, with the kernels' exact signatures.

These are the semantics the Triton kernels must reproduce (tests compare outputs and
gradients), and they are what autograd's ``gradcheck`` checks in float64. ``training.model.moe``'s
torch backend routes, permutes and unpermutes with them; they live here so that ``moe_kernels/``
depends on torch alone, as the layering in DESIGN.md requires.

    route(logits [N,E], topk, ...)            -> gates [N,k], ids [N,k], scores [N,E], tokens_per_expert [E]
    permute(x [N,h], ids [N,k], E)            -> x_perm [N*k,h] (expert-major), order [N*k], tokens_per_expert [E]
    unpermute(y [N*k,h], order, gates [N,k])  -> out [N,h]
    grouped_gemm(x [M,K], w [E,K,N], tokens_per_expert [E]) -> y [M,N]   (rows of expert e times W_e)
    expert_ffn(x, tokens_per_expert, w1 [E,2f,h], w2 [E,h,f]) -> y      (SwiGLU, Megatron's [out, in] layout)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def route(
    logits: torch.Tensor,
    topk: int,
    score_function: str = "sigmoid",
    expert_bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
    scaling_factor: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores, bias-steered (optionally group-limited) top-k, gates from the unbiased scores."""
    N, E = logits.shape
    # fp32 at least; float64 stays float64 so gradcheck can run
    z = logits.to(torch.promote_types(logits.dtype, torch.float32))
    scores = torch.sigmoid(z) if score_function == "sigmoid" else z.softmax(-1)
    with torch.no_grad():
        # the bias only chooses experts; it never weights them (aux-loss-free balancing)
        choose = scores + expert_bias.to(scores.dtype) if expert_bias is not None else scores.clone()
        if group_topk:
            grouped = choose.view(N, num_groups, E // num_groups)
            group_scores = grouped.topk(topk // group_topk, dim=-1).values.sum(-1)
            keep = torch.zeros_like(group_scores, dtype=torch.bool)
            keep.scatter_(1, group_scores.topk(group_topk, -1).indices, True)
            choose = choose.masked_fill(~keep.repeat_interleave(E // num_groups, 1), float("-inf"))
        ids = choose.topk(topk, dim=-1).indices
    gates = scores.gather(1, ids)
    if score_function == "sigmoid" and topk > 1:
        gates = gates / (gates.sum(-1, keepdim=True) + 1e-20)
    if scaling_factor:
        gates = gates * scaling_factor
    return gates, ids, scores, torch.bincount(ids.reshape(-1), minlength=E)


def permute(
    x: torch.Tensor, ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One copy of each token per pick, grouped by expert, token order kept inside an expert.

    ``order[p]`` is the flat pick index (token * k + j) that landed on row p; rows
    ``offsets[e]:offsets[e+1]`` (offsets = exclusive cumsum of tokens_per_expert) belong to e."""
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    return x[order // ids.shape[1]], order, torch.bincount(flat, minlength=num_experts)


def unpermute(y: torch.Tensor, order: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """Inverse of ``permute``: each token's k expert rows, weighted by its gates and summed."""
    N, k = gates.shape
    back = torch.empty_like(order)
    back[order] = torch.arange(order.numel(), device=order.device)
    return (y[back].view(N, k, -1) * gates[..., None].to(y.dtype)).sum(1)


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """``X_e @ W_e`` for each expert's contiguous block of rows: a loop of matmuls."""
    # unbind, not w[e]: its backward is one stack, not E full-size zero tensors added up
    outs = [xe @ we for xe, we in zip(x.split(tokens_per_expert.tolist()), w.unbind(0), strict=True)]
    out = torch.cat(outs) if outs else x.new_zeros(0, w.shape[2])
    # an empty expert contributes no rows but its weight must still get a (zero) gradient
    return out + 0 * w.sum().to(out.dtype) if x.shape[0] == 0 else out


def grouped_mm_available(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether ``torch._grouped_mm`` exists on this build and accepts these operands
    (bf16/fp16/fp32, rows 16-byte aligned); benchmarks fall back to the loop otherwise."""
    if not hasattr(torch, "_grouped_mm") or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    size = x.element_size()
    return all(d * size % 16 == 0 for d in (x.shape[1], w.shape[1], w.shape[2]))


def grouped_gemm_torch(x: torch.Tensor, w: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """``grouped_gemm`` through ``torch._grouped_mm`` (one call, no host sync)."""
    offs = torch.cumsum(tokens_per_expert, 0).to(torch.int32)
    return torch._grouped_mm(x, w.to(x.dtype), offs=offs)


def expert_ffn(
    x: torch.Tensor, tokens_per_expert: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """All experts' SwiGLU MLPs; w1 [E, 2f, h] rows = [gate; up], w2 [E, h, f] (Megatron layout)."""
    w1, w2 = w1.to(x.dtype), w2.to(x.dtype)
    gate, up = grouped_gemm(x, w1.transpose(1, 2), tokens_per_expert).chunk(2, dim=-1)
    return grouped_gemm(F.silu(gate) * up, w2.transpose(1, 2), tokens_per_expert)
