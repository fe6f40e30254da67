"""Dropless MoE: sigmoid router with aux-loss-free expert bias, grouped-GEMM experts, shared expert.

The layer is four steps with fixed signatures, so faster kernels with the same signatures
(``moe_backend: triton`` plugs in ``moe_kernels/``) can replace any of them:

    route(logits [N,E], ...)                       -> probs [N,k], indices [N,k], scores [N,E]
    permute(x [N,h], indices [N,k], E)             -> x_perm [N*k,h] (expert-major), order [N*k], tokens_per_expert [E]
    experts(x_perm, tokens_per_expert, w1, w2)     -> y_perm [N*k,h]   (w1 [E,2f,h], w2 [E,h,f]; SwiGLU)
    unpermute(y_perm, order, probs)                -> y [N,h]           (probability-weighted sum over the k picks)

Routing follows Megatron's ``topk_routing_with_score_function``: the expert bias only chooses
experts (it never weights them), chosen sigmoid scores are normalized over the k picks, then
multiplied by ``moe_router_topk_scaling_factor``. The bias moves toward balance after every
optimizer step by ``rate * sign(mean load - load)`` (Megatron's ``get_updated_expert_bias``).
Weights are stored like Megatron's per-expert ``linear_fc1``/``linear_fc2`` ([out, in]),
stacked over experts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from core.errors import ConfigError
from moe_kernels import reference
from training.model.config import ModelConfig


class MLP(nn.Module):
    """SwiGLU MLP with Megatron's fused fc1 layout: rows [gate; up]."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.linear_fc1 = nn.Linear(hidden, 2 * ffn, bias=False)
        self.linear_fc2 = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.linear_fc1(x).chunk(2, dim=-1)
        return self.linear_fc2(F.silu(gate) * up)


# -- the four steps ---------------------------------------------------------------------------
def route(
    logits: torch.Tensor,
    topk: int,
    score_function: str = "sigmoid",
    expert_bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
    scaling_factor: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-k routing: combine weights [N,k], expert ids [N,k] and all scores [N,E].

    ``moe_kernels.reference.route`` (the semantics the Triton router reproduces) without its
    per-expert counts, which ``permute`` returns."""
    gates, ids, scores, _ = reference.route(logits, topk, score_function, expert_bias, num_groups, group_topk,
                                            scaling_factor)
    return gates, ids, scores


# copy each token once per pick, grouped by expert / undo it, summing the k picks by their gates
permute = reference.permute
unpermute = reference.unpermute


def grouped_experts(
    x: torch.Tensor, tokens_per_expert: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """All experts' SwiGLU MLPs in two grouped GEMMs (``F.grouped_mm``) over expert-major rows."""
    if x.shape[0] == 0:  # an expert-parallel rank can receive nothing; keep the graph connected
        return x.new_zeros(0, w2.shape[1]) + 0 * (w1.sum() + w2.sum()).to(x.dtype)
    # CUDA's grouped_mm kernel takes bf16 only (the CPU one also fp32/fp16): fp32 on a GPU loops
    if not _grouped_mm_ok(x.dtype, x.shape[1], w1.shape[1], w2.shape[2]) or (x.is_cuda and x.dtype != torch.bfloat16):
        return loop_experts(x, tokens_per_expert, w1, w2)
    w1, w2 = w1.to(x.dtype), w2.to(x.dtype)  # autocast does not cover grouped_mm
    offs = torch.cumsum(tokens_per_expert, 0).to(torch.int32)
    gate, up = F.grouped_mm(x, w1.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
    return F.grouped_mm(F.silu(gate) * up, w2.transpose(-2, -1), offs=offs)


def _grouped_mm_ok(dtype: torch.dtype, *dims: int) -> bool:
    """grouped_mm takes fp32/bf16/fp16 with 16-byte aligned rows; float64 (tests) or odd
    sizes use the loop, which gives the same result."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    size = torch.finfo(dtype).bits // 8
    return all(d * size % 16 == 0 for d in dims)


def loop_experts(
    x: torch.Tensor, tokens_per_expert: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """Reference for ``grouped_experts``: one matmul pair per expert."""
    outs, start = [], 0
    w1, w2 = w1.to(x.dtype), w2.to(x.dtype)
    for e, n in enumerate(tokens_per_expert.tolist()):
        gate, up = (x[start : start + n] @ w1[e].T).chunk(2, dim=-1)
        outs.append((F.silu(gate) * up) @ w2[e].T)
        start += n
    return torch.cat(outs) if outs else x.new_zeros(0, w2.shape[1])


@dataclass(frozen=True)
class MoEBackend:
    route: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    permute: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    experts: Callable[..., torch.Tensor]
    unpermute: Callable[..., torch.Tensor]


def get_backend(name: str) -> MoEBackend:
    if name == "torch":
        return MoEBackend(route, permute, grouped_experts, unpermute)
    if name == "triton":
        # imported here: defining the Triton kernels is only needed (and only possible to
        # run) where this backend is chosen
        from moe_kernels.moe_backend import steps, unavailable_reason

        if why := unavailable_reason():
            raise ConfigError(f"model.moe_backend: {why}")
        return MoEBackend(*steps())
    raise ConfigError(f"model.moe_backend: unknown backend {name!r} (available: torch, triton)")


def sequence_aux_loss(
    scores: torch.Tensor, indices: torch.Tensor, batch: int, num_experts: int
) -> torch.Tensor:
    """DeepSeek-V3's sequence-wise balance loss sum_i f_i * P_i, averaged over sequences.

    f_i = E / (k * T) * (picks of expert i in the sequence); P_i = mean over the sequence of
    expert i's score normalized over all experts."""
    N, k = indices.shape
    T = N // batch
    norm = (scores / (scores.sum(-1, keepdim=True) + 1e-20)).view(batch, T, num_experts)
    counts = torch.zeros(batch, num_experts, device=scores.device)
    counts.scatter_add_(1, indices.view(batch, T * k), torch.ones(batch, T * k, device=scores.device))
    f = counts * num_experts / (k * T)
    return (f * norm.mean(1)).sum(-1).mean()


# -- the layer --------------------------------------------------------------------------------
class _Stacked(nn.Module):
    """A stack of per-expert [out, in] weights, named ``weight`` like a Linear."""

    def __init__(self, experts: int, out_features: int, in_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts, out_features, in_features))


class Router(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        E = cfg.num_moe_experts
        self.weight = nn.Parameter(torch.empty(E, cfg.hidden_size))
        if cfg.moe_router_enable_expert_bias:
            # a buffer, not a parameter: it is moved by load counts, never by gradients
            self.register_buffer("expert_bias", torch.zeros(E, dtype=torch.float32))
        else:
            self.expert_bias = None
        self.register_buffer("local_tokens_per_expert", torch.zeros(E, dtype=torch.float32), persistent=False)


class MoELayer(nn.Module):
    def __init__(self, cfg: ModelConfig, ep_group: dist.ProcessGroup | None = None):
        super().__init__()
        self.cfg = cfg
        self.num_experts = cfg.num_moe_experts
        self.ep_group = ep_group
        ep = dist.get_world_size(ep_group) if ep_group is not None else 1
        if self.num_experts % ep:
            raise ConfigError(
                f"model.num_moe_experts: {self.num_experts} not divisible by {ep} expert-parallel ranks"
            )
        self.num_local = self.num_experts // ep
        f = cfg.moe_ffn_hidden_size
        self.router = Router(cfg)
        self.experts = nn.Module()
        self.experts.linear_fc1 = _Stacked(self.num_local, 2 * f, cfg.hidden_size)
        self.experts.linear_fc2 = _Stacked(self.num_local, cfg.hidden_size, f)
        s = cfg.moe_shared_expert_intermediate_size
        self.shared_experts = MLP(cfg.hidden_size, s) if s else None
        self.backend = get_backend(cfg.moe_backend)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, L, h] -> (output [B, L, h], sequence aux loss (0 unless configured))."""
        B, L, h = x.shape
        cfg, be = self.cfg, self.backend
        flat = x.reshape(B * L, h)
        logits = F.linear(flat.float(), self.router.weight.float())
        probs, indices, scores = be.route(
            logits,
            cfg.moe_router_topk,
            cfg.moe_router_score_function,
            self.router.expert_bias,
            cfg.moe_router_num_groups,
            cfg.moe_router_group_topk,
            cfg.moe_router_topk_scaling_factor,
        )
        x_perm, order, tokens_per_expert = be.permute(flat, indices, self.num_experts)
        if self.training and self.router.expert_bias is not None:
            self.router.local_tokens_per_expert += tokens_per_expert.to(torch.float32)
        w1, w2 = self.experts.linear_fc1.weight, self.experts.linear_fc2.weight
        if self.ep_group is None:
            y_perm = be.experts(x_perm, tokens_per_expert, w1, w2)
        else:
            from training.expert_parallel import combine, dispatch

            x_local, local_counts, handle = dispatch(x_perm, tokens_per_expert, self.num_local, self.ep_group)
            y_perm = combine(be.experts(x_local, local_counts, w1, w2), handle)
        out = be.unpermute(y_perm, order, probs)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        aux = flat.new_zeros((), dtype=torch.float32)
        if cfg.moe_router_load_balancing_type == "seq_aux_loss" and self.training:
            aux = cfg.moe_aux_loss_coeff * sequence_aux_loss(scores, indices, B, self.num_experts)
        return out.view(B, L, h), aux

    @torch.no_grad()
    def update_expert_bias(self, group: dist.ProcessGroup | None = None) -> torch.Tensor | None:
        """Move the expert bias toward balanced load (call once per optimizer step); returns
        the load that drove the update. With data parallelism pass the group to sum loads."""
        r = self.router
        if r.expert_bias is None:
            return None
        load = r.local_tokens_per_expert.clone()
        if group is not None:
            dist.all_reduce(load, group=group)
        if not self.cfg.moe_router_freeze_expert_bias and self.cfg.moe_router_bias_update_rate > 0:
            r.expert_bias += torch.sign(load.mean() - load) * self.cfg.moe_router_bias_update_rate
        r.local_tokens_per_expert.zero_()
        return load
