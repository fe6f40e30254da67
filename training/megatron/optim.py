"""Optimizers for the Megatron path: Megatron's own for AdamW, our (Split)Muon for the matrices.

* ``adamw``: ``megatron.core.optimizer.get_megatron_optimizer`` over the DDP-wrapped model:
  Megatron's param groups (no weight decay on 1-D parameters and biases, as ours), its
  ``FP32Optimizer`` wrapper (main-grad copy, grad-norm clipping across model-parallel ranks)
  over torch's ``AdamW`` (Megatron's fallback without Apex / Transformer Engine fused Adam).
* ``muon`` / ``muon_split``: our ``training.optim.muon.Muon`` over Megatron's parameters, routed
  like ours (``training/optim/optimizers.py``) by Megatron's names, inside the same
  ``FP32Optimizer`` wrapper (so clipping, checkpoints and the schedule's calls are Megatron's).
  MuonSplit's per-head blocks come from our model's ``up_proj_blocks`` with the head count
  divided by the tensor-parallel size: a TP rank holds whole heads of ``linear_q_up_proj`` /
  ``linear_kv_up_proj`` and orthogonalises exactly those. Any other tensor-parallel matrix is
  orthogonalised whole: its slices are all-gathered over the TP group, Newton-Schulz runs on
  the full matrix (as one process would) and each rank keeps its slice. Megatron's local spec
  holds experts as one 2-D matrix each (``SequentialMLP``), which is what ours does per expert;
  our grouped-GEMM experts (``experts.py``) hold them stacked, and Muon orthogonalises each
  expert's [in, out] view of the stack (the same matrices, transposed).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from training.megatron.experts import expert_views
from training.megatron.weights import full_from_slices, global_names, is_glu_fc1, is_tp_sharded, local_slice
from training.model.config import ModelConfig
from training.optim.muon import Muon, orthogonal_update
from training.optim.optimizers import EMBEDDING_NAMES, OptimizerConfig
from training.tools.megatron_bridge import megatron_names


def megatron_optimizer_config(cfg: OptimizerConfig, grad_clip: float):
    from megatron.core.optimizer import OptimizerConfig as MegatronOptimizerConfig

    return MegatronOptimizerConfig(
        optimizer="adam", lr=cfg.lr, weight_decay=cfg.weight_decay, adam_beta1=cfg.betas[0],
        adam_beta2=cfg.betas[1], adam_eps=cfg.eps, clip_grad=grad_clip, bf16=False, fp16=False,
    )  # fmt: skip


def split_blocks(model_cfg: ModelConfig, up_proj_blocks: dict[str, tuple[int, list[int]]], tp: int) -> dict[str, Any]:
    """Megatron parameter name -> (local heads, row blocks) for MuonSplit on a TP rank."""
    out = {}
    for ours, targets in megatron_names(model_cfg, list(up_proj_blocks), "local").items():
        heads, rows = up_proj_blocks[ours]
        if heads % tp:
            raise ValueError(f"{ours}: {heads} heads do not split over tensor_model_parallel_size {tp}")
        for name, _ in targets:
            out[name] = (heads // tp, list(rows))
    return out


def route(name: str, p: torch.Tensor, cfg: OptimizerConfig, split: dict[str, Any]) -> str:
    if p.ndim < 2:
        return "adamw_no_wd"
    if cfg.name == "adamw" or name in EMBEDDING_NAMES:
        return "adamw"
    if name in split:
        return "muon_split"
    return "muon"


class TPMuon(Muon):
    """``Muon`` whose TP-sharded, non-split matrices are orthogonalised whole (see module doc).
    Muon parameters also count a ``step``, so Megatron's ``FP32Optimizer`` checkpoint finds one
    common step for every parameter (it refuses per-parameter steps). Each parameter's name and
    MuonSplit blocks live here, not in the param groups: the groups are checkpoint "common
    state", written by rank 0 alone, and pipeline stages hold different parameters."""

    def __init__(self, param_groups, tp_groups: dict[int, Any], meta: dict[int, tuple[str, Any]],
                 views: dict[int, tuple[int, ...]], **kw):  # fmt: skip
        super().__init__(param_groups, **kw)
        self.tp_groups = tp_groups  # id(param) -> process group holding its slices
        self.meta = meta  # id(param) -> (whole-model name, MuonSplit blocks or None)
        self.views = views  # id(param) -> [experts, in, out] view of stacked experts

    def _update(self, p: torch.Tensor, u: torch.Tensor, spec, name: str, args) -> torch.Tensor:
        if id(p) in self.views:  # batched over the experts
            return orthogonal_update(u.view(self.views[id(p)]), None, *args).view_as(u)
        group = self.tp_groups.get(id(p))
        if spec is not None or group is None or dist.get_world_size(group) == 1:
            return orthogonal_update(u, spec, *args)
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        parts = [torch.empty_like(u) for _ in range(size)]
        dist.all_gather(parts, u.contiguous(), group=group)
        glu = is_glu_fc1(name, True)
        full = orthogonal_update(full_from_slices(parts, p.partition_dim, glu), None, *args)
        return local_slice(full, p.partition_dim, rank, size, glu)

    def _muon(self, g: dict[str, Any]) -> None:
        lr, wd, mu = g["lr"], g["weight_decay"], g["momentum"]
        for p in g["params"]:
            if p.grad is None:
                continue
            name, spec = self.meta[id(p)]
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] = torch.zeros((), dtype=torch.float32)
            state["step"] += 1
            buf = state["momentum_buffer"]
            buf.mul_(mu).add_(p.grad)
            u = p.grad.add(buf, alpha=mu) if g["nesterov"] else buf
            spec = None if spec is None else (int(spec[0]), [int(r) for r in spec[1]])
            args = (g["ns_steps"], g["ns_coefficients"], g["rms_scale"], self.ns_dtype)
            p.mul_(1 - lr * wd).add_(self._update(p, u, spec, name, args).to(p.dtype), alpha=-lr)

    @torch.no_grad()
    def init_state(self) -> None:
        super().init_state()
        for g in self.param_groups:
            if g["use_muon"]:
                for p in g["params"]:
                    self.state[p].setdefault("step", torch.zeros((), dtype=torch.float32))


def build_optimizer(ddp_chunks: list, model_cfg: ModelConfig, up_proj_blocks, cfg: OptimizerConfig, grad_clip: float):
    """Megatron optimizer wrapper over ``ddp_chunks`` (Megatron's DDP around each GPTModel chunk)."""
    from megatron.core import parallel_state as ps
    from megatron.core.optimizer import get_megatron_optimizer

    mcfg = megatron_optimizer_config(cfg, grad_clip)
    if cfg.qk_clip_tau:
        raise ValueError("optimizer.qk_clip_tau: QK-clip is not wired into the Megatron trainer")
    if cfg.name == "adamw":
        return get_megatron_optimizer(mcfg, ddp_chunks)
    tp = ps.get_tensor_model_parallel_world_size()
    split = split_blocks(model_cfg, up_proj_blocks, tp) if cfg.name == "muon_split" else {}
    # whole-model names: a pipeline stage numbers its layers from 0, MuonSplit's blocks do not
    named = []
    for chunk in ddp_chunks:
        glob = global_names(chunk.module)
        named += [(glob[n], p) for n, p in chunk.module.named_parameters() if p.requires_grad]
    views = expert_views([chunk.module for chunk in ddp_chunks])
    if ps.get_expert_model_parallel_world_size() == 1:
        return _muon_fp32(named, cfg, mcfg, split, views)
    from megatron.core.optimizer.optimizer import ChainedOptimizer

    # as Megatron's own get_megatron_optimizer: expert parameters (held by one EP rank each) get
    # their own optimizer whose grad norm is reduced over the expert-parallel ranks; the chain
    # clips both by the combined norm
    expert = [(n, p) for n, p in named if not getattr(p, "allreduce", True)]
    dense = [(n, p) for n, p in named if getattr(p, "allreduce", True)]
    opts = [_muon_fp32(dense, cfg, mcfg, split, views), _muon_fp32(expert, cfg, mcfg, split, views)]
    opts[0].grad_stats_parallel_group = ps.get_model_parallel_group()
    opts[1].grad_stats_parallel_group = ps.get_expert_tensor_model_pipeline_parallel_group()
    return ChainedOptimizer(opts)


def _muon_fp32(named: list[tuple[str, torch.Tensor]], cfg: OptimizerConfig, mcfg, split: dict[str, Any], views):
    """Our (Split)Muon over ``named`` inside Megatron's FP32Optimizer."""
    from megatron.core import parallel_state as ps
    from megatron.core.optimizer.optimizer import FP32Optimizer

    routes = {n: route(n, p, cfg, split) for n, p in named}
    params = dict(named)
    tp_groups = {}
    for _, p in named:
        if is_tp_sharded(p):
            expert = not getattr(p, "allreduce", True)
            tp_groups[id(p)] = ps.get_expert_tensor_parallel_group() if expert else ps.get_tensor_model_parallel_group()
    muon = [n for n, r in routes.items() if r in ("muon", "muon_split")]
    groups = [
        {"params": [params[n] for n in muon], "role": "muon", "use_muon": True},
        {"params": [params[n] for n, r in routes.items() if r == "adamw"], "role": "adamw"},
        {"params": [params[n] for n, r in routes.items() if r == "adamw_no_wd"], "role": "adamw_no_wd",
         "weight_decay": 0.0},
    ]  # fmt: skip
    meta = {id(p): (n, split[n] if routes[n] == "muon_split" else None) for n, p in named}
    inner = TPMuon(
        [g for g in groups if g["params"]], tp_groups, meta, views, lr=cfg.lr, weight_decay=cfg.weight_decay,
        momentum=cfg.momentum, nesterov=cfg.nesterov, ns_steps=cfg.ns_steps, ns_coefficients=cfg.ns_coefficients,
        rms_scale=cfg.rms_scale, betas=cfg.betas, eps=cfg.eps, ns_dtype=getattr(torch, cfg.ns_dtype),
    )  # fmt: skip
    return _muon_wrapper(FP32Optimizer)(inner, mcfg, lambda opt, _cfg: opt.init_state())


def _muon_wrapper(fp32_optimizer_cls):
    class MuonFP32Optimizer(fp32_optimizer_cls):
        """Megatron's FP32Optimizer around our Muon. Megatron matches a checkpoint's param groups
        to the live ones by (wd_mult, lr_mult, is_expert_parallel, is_decoupled_lr), keys its own
        ``_get_param_groups`` writes; our groups (Muon / AdamW / AdamW without decay) are told
        apart by their ``role`` instead (the same on every rank)."""

        def _filter_and_reorder_param_groups(self, current_groups, state_dict_groups):
            saved = {g["role"]: g for g in state_dict_groups}
            out = []
            for g in current_groups:
                if g["role"] not in saved:
                    raise ValueError(f"checkpoint has no optimizer group {g['role']!r}")
                out.append(saved[g["role"]])
            return out

    return MuonFP32Optimizer
