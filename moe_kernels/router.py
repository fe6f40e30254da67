"""Fused MoE router: scores, bias-steered (group-limited) top-k, gates and per-expert counts.

One program handles ``BLOCK_N`` tokens with all E expert logits in registers (E <= a few
hundred), so the whole routing decision is one pass over the logits: no [N,E] temporaries
beyond the scores themselves (kept for the sequence aux loss and the backward).

Top-k is k rounds of "row max, lowest column attaining it, mask it out": k is small (8 for
GLM-5) and the rounds run on registers. The order of picks equals ``torch.topk``'s
(descending), so ids can be compared to the reference exactly. The backward recomputes
nothing but the cheap gate normalisation and writes dlogits in one pass.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_kernels.runtime import check_device


@triton.jit
def _route_fwd(
    logits_ptr, bias_ptr, scores_ptr, gates_ptr, ids_ptr, counts_ptr,
    N, scale,
    E: tl.constexpr, BLOCK_E: tl.constexpr, K: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
    SIGMOID: tl.constexpr, HAS_BIAS: tl.constexpr, NORMALIZE: tl.constexpr,
    GROUPS: tl.constexpr, GROUP_TOPK: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < N
    ok = row_ok[:, None] & (cols[None, :] < E)
    offs = rows.to(tl.int64)[:, None] * E + cols[None, :]
    logit = tl.load(logits_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    if SIGMOID:
        s = tl.sigmoid(logit)
    else:
        z = tl.where((cols < E)[None, :], logit, float("-inf"))  # padded rows loaded 0: no inf - inf
        z = tl.exp(z - tl.max(z, axis=1)[:, None])
        s = z / tl.sum(z, axis=1)[:, None]
    tl.store(scores_ptr + offs, s, mask=ok)

    choose = s
    if HAS_BIAS:
        choose = choose + tl.load(bias_ptr + cols, mask=cols < E, other=0.0).to(tl.float32)[None, :]
    choose = tl.where(ok, choose, float("-inf"))

    if GROUPS > 1:
        # group score = sum of the group's top (K // GROUP_TOPK) choice scores, broadcast to its columns
        gsize: tl.constexpr = E // GROUPS
        gid = cols // gsize
        gscore = tl.zeros((BLOCK_N, BLOCK_E), dtype=tl.float32)
        for g in tl.static_range(GROUPS):
            v = tl.where((gid == g)[None, :], choose, float("-inf"))
            total = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for _ in tl.static_range(K // GROUP_TOPK):
                m = tl.max(v, axis=1)
                first = tl.min(tl.where(v == m[:, None], cols[None, :], BLOCK_E), axis=1)
                total += m
                v = tl.where(cols[None, :] == first[:, None], float("-inf"), v)
            gscore = tl.where((gid == g)[None, :], total[:, None], gscore)
        gscore = tl.where(ok, gscore, float("-inf"))
        keep = tl.zeros((BLOCK_N, BLOCK_E), dtype=tl.int1)
        for _ in tl.static_range(GROUP_TOPK):
            m = tl.max(gscore, axis=1)
            first = tl.min(tl.where(gscore == m[:, None], cols[None, :], BLOCK_E), axis=1)
            picked = gid[None, :] == (first // gsize)[:, None]
            keep = keep | picked
            gscore = tl.where(picked, float("-inf"), gscore)
        choose = tl.where(keep, choose, float("-inf"))

    # the k picks are collected in [BLOCK_N, BLOCK_K] registers and stored once at the end
    picks = tl.arange(0, BLOCK_K)
    ids = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.int64)
    gates = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for j in tl.static_range(K):
        m = tl.max(choose, axis=1)
        idx = tl.min(tl.where(choose == m[:, None], cols[None, :], BLOCK_E), axis=1)
        hit = cols[None, :] == idx[:, None]
        gate = tl.sum(tl.where(hit, s, 0.0), axis=1)  # gates come from the unbiased scores
        ids = tl.where(picks[None, :] == j, idx[:, None].to(tl.int64), ids)
        gates = tl.where(picks[None, :] == j, gate[:, None], gates)
        tl.atomic_add(counts_ptr + idx, 1, mask=row_ok)
        choose = tl.where(hit, float("-inf"), choose)

    if NORMALIZE:
        gates = gates / (tl.sum(gates, axis=1)[:, None] + 1e-20)
    out = rows[:, None] * K + picks[None, :]
    out_ok = row_ok[:, None] & (picks[None, :] < K)
    tl.store(ids_ptr + out, ids, mask=out_ok)
    tl.store(gates_ptr + out, gates * scale, mask=out_ok)


@triton.jit
def _route_bwd(
    scores_ptr, ids_ptr, dgates_ptr, dscores_ptr, dlogits_ptr,
    N, scale,
    E: tl.constexpr, BLOCK_E: tl.constexpr, K: tl.constexpr, BLOCK_N: tl.constexpr,
    SIGMOID: tl.constexpr, NORMALIZE: tl.constexpr, HAS_DSCORES: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < N
    ok = row_ok[:, None] & (cols[None, :] < E)
    offs = rows.to(tl.int64)[:, None] * E + cols[None, :]
    s = tl.load(scores_ptr + offs, mask=ok, other=0.0)
    if HAS_DSCORES:
        ds = tl.load(dscores_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    else:
        ds = tl.zeros((BLOCK_N, BLOCK_E), dtype=tl.float32)

    # gate_j = scale * s_j / S with S = sum of the picked scores (+1e-20) when normalising:
    # d s_j = scale * (dg_j / S - sum_i dg_i s_i / S^2); without normalising d s_j = scale * dg_j
    picked_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
    weighted = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for j in tl.static_range(K):
        idx = tl.load(ids_ptr + rows * K + j, mask=row_ok, other=0)
        dg = tl.load(dgates_ptr + rows * K + j, mask=row_ok, other=0.0).to(tl.float32)
        sj = tl.sum(tl.where(cols[None, :] == idx[:, None], s, 0.0), axis=1)
        picked_sum += sj
        weighted += dg * sj
    if NORMALIZE:
        inv = 1.0 / (picked_sum + 1e-20)
    else:
        inv = tl.full((BLOCK_N,), 1.0, tl.float32)
        weighted = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for j in tl.static_range(K):
        idx = tl.load(ids_ptr + rows * K + j, mask=row_ok, other=0)
        dg = tl.load(dgates_ptr + rows * K + j, mask=row_ok, other=0.0).to(tl.float32)
        dsj = scale * (dg * inv - weighted * inv * inv)
        ds += tl.where(cols[None, :] == idx[:, None], dsj[:, None], 0.0)

    if SIGMOID:
        dl = ds * s * (1.0 - s)
    else:
        dl = s * (ds - tl.sum(ds * s, axis=1)[:, None])
    tl.store(dlogits_ptr + offs, dl, mask=ok)


def _block_n(E: int) -> int:
    # keep ~4K scores per program: enough rows to amortise, few enough to stay in registers
    return max(1, min(64, 4096 // triton.next_power_of_2(E)))


class _Route(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, expert_bias, topk, sigmoid, num_groups, group_topk, scale):
        N, E = logits.shape
        logits = logits.contiguous()
        dev = logits.device
        scores = torch.empty(N, E, device=dev, dtype=torch.float32)
        gates = torch.empty(N, topk, device=dev, dtype=torch.float32)
        ids = torch.empty(N, topk, device=dev, dtype=torch.int64)
        counts = torch.zeros(E, device=dev, dtype=torch.int32)
        bias = expert_bias.contiguous() if expert_bias is not None else scores  # dummy pointer when absent
        normalize = sigmoid and topk > 1
        bn = _block_n(E)
        if N:
            _route_fwd[(triton.cdiv(N, bn),)](
                logits, bias, scores, gates, ids, counts, N, scale,
                E=E, BLOCK_E=triton.next_power_of_2(E), K=topk, BLOCK_K=triton.next_power_of_2(topk),
                BLOCK_N=bn, SIGMOID=sigmoid, HAS_BIAS=expert_bias is not None, NORMALIZE=normalize,
                GROUPS=num_groups or 1, GROUP_TOPK=group_topk or 1,
            )  # fmt: skip
        ctx.save_for_backward(scores, ids)
        ctx.cfg = (sigmoid, normalize, scale, logits.dtype)
        ctx.mark_non_differentiable(ids, counts)
        return gates, ids, scores, counts.to(torch.int64)

    @staticmethod
    def backward(ctx, dgates, _dids, dscores, _dcounts):
        scores, ids = ctx.saved_tensors
        sigmoid, normalize, scale, dtype = ctx.cfg
        N, E = scores.shape
        dlogits = torch.empty(N, E, device=scores.device, dtype=torch.float32)
        if dgates is None:
            dgates = torch.zeros_like(ids, dtype=torch.float32)
        bn = _block_n(E)
        if N:
            _route_bwd[(triton.cdiv(N, bn),)](
                scores, ids, dgates.contiguous(), dscores.contiguous() if dscores is not None else scores,
                dlogits, N, scale,
                E=E, BLOCK_E=triton.next_power_of_2(E), K=ids.shape[1], BLOCK_N=bn,
                SIGMOID=sigmoid, NORMALIZE=normalize, HAS_DSCORES=dscores is not None,
            )  # fmt: skip
        return dlogits.to(dtype), None, None, None, None, None, None


def route(
    logits: torch.Tensor,
    topk: int,
    score_function: str = "sigmoid",
    expert_bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
    scaling_factor: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton ``moe_kernels.reference.route``: gates [N,k] fp32, ids [N,k], scores [N,E], tokens_per_expert [E].

    Differentiable in ``logits`` through gates and scores; the expert bias gets no gradient
    (it is moved by load counts, see ``MoELayer.update_expert_bias``)."""
    if score_function not in ("sigmoid", "softmax"):
        raise ValueError(f"score_function must be sigmoid or softmax, got {score_function!r}")
    check_device(logits)
    E = logits.shape[1]
    if group_topk and (E % num_groups or topk % group_topk):
        raise ValueError(f"group-limited routing needs E={E} % groups and topk={topk} % group_topk == 0")
    bias = expert_bias.detach() if expert_bias is not None else None
    return _Route.apply(
        logits, bias, topk, score_function == "sigmoid", num_groups if group_topk else None,
        group_topk, float(scaling_factor or 1.0),
    )  # fmt: skip
