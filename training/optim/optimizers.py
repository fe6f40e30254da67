"""Which parameter gets which optimizer, and QK-clip.

Routing (``route_params``), by parameter name and shape:

* ``adamw``        embedding (``embedding.word_embeddings``) and output layer (``output_layer``),
                   with weight decay; every parameter when ``name: adamw``;
* ``adamw_no_wd``  1-D parameters: norms and biases (including a learnable router bias, if
                   any), without weight decay;
* ``muon_split``   (``name: muon_split`` only) MLA up-projections ``linear_q_up_proj`` (or
                   ``linear_q_proj``) and ``linear_kv_up_proj``: orthogonalized per head
                   (W_UQ per head; W_UK and W_UV per head separately);
* ``muon``         every other matrix: attention projections, dense and shared-expert MLPs,
                   stacked experts (one matrix per expert), router weight, MTP ``eh_proj``.

The aux-loss-free expert bias is a buffer moved by load counts, so no optimizer touches it.

QK-clip (optional, per head): after a step, a head whose largest attention logit exceeded
``tau`` gets its query/key weights rescaled so that logit becomes ``tau``: gamma = tau / S_max,
the non-RoPE query and key parts by sqrt(gamma) each, the per-head RoPE query part by gamma (the
RoPE key is shared by all heads and left alone) — MuonClip's rule for MLA. MLA only: a GQA
head's q/k pass through norms shared by all heads, so per-head weight scaling cannot cap it.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from core.config import StrictModel
from training.model.mla import MLA
from training.optim.muon import NS_COEFFICIENTS, Muon

Route = Literal["muon", "muon_split", "adamw", "adamw_no_wd"]


class OptimizerConfig(StrictModel):
    name: Literal["adamw", "muon", "muon_split"] = "muon_split"
    lr: float = Field(default=3e-3, gt=0)  # one rate for both (Muon updates are RMS-matched)
    weight_decay: float = Field(default=0.1, ge=0)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = Field(default=1e-8, gt=0)
    momentum: float = Field(default=0.95, ge=0, lt=1)
    nesterov: bool = True
    ns_steps: int = Field(default=5, gt=0)
    ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS
    rms_scale: float = Field(default=0.2, gt=0)  # update x rms_scale * sqrt(max(A, B))
    ns_dtype: Literal["float32", "bfloat16"] = "float32"
    qk_clip_tau: float | None = Field(default=None, gt=0)  # e.g. 100; None = off


EMBEDDING_NAMES = ("embedding.word_embeddings.weight", "output_layer.weight")


def route_params(model: torch.nn.Module, cfg: OptimizerConfig) -> dict[str, Route]:
    split = model.up_proj_blocks() if cfg.name == "muon_split" else {}
    routes: dict[str, Route] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2:
            routes[name] = "adamw_no_wd"
        elif cfg.name == "adamw" or name in EMBEDDING_NAMES:
            routes[name] = "adamw"
        elif name in split:
            routes[name] = "muon_split"
        else:
            routes[name] = "muon"
    return routes


def build_optimizer(model: torch.nn.Module, cfg: OptimizerConfig) -> Muon:
    routes = route_params(model, cfg)
    split = model.up_proj_blocks()
    params = dict(model.named_parameters())
    muon = [n for n, r in routes.items() if r in ("muon", "muon_split")]
    groups = [
        {
            "params": [params[n] for n in muon],
            "blocks": [split[n] if routes[n] == "muon_split" else None for n in muon],
            "use_muon": True,
            "names": muon,
        },
        {
            "params": [params[n] for n, r in routes.items() if r == "adamw"],
            "names": [n for n, r in routes.items() if r == "adamw"],
        },
        {
            "params": [params[n] for n, r in routes.items() if r == "adamw_no_wd"],
            "weight_decay": 0.0,
            "names": [n for n, r in routes.items() if r == "adamw_no_wd"],
        },
    ]
    return Muon(
        [g for g in groups if g["params"]],
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        momentum=cfg.momentum,
        nesterov=cfg.nesterov,
        ns_steps=cfg.ns_steps,
        ns_coefficients=cfg.ns_coefficients,
        rms_scale=cfg.rms_scale,
        betas=cfg.betas,
        eps=cfg.eps,
        ns_dtype=getattr(torch, cfg.ns_dtype),
    )


@torch.no_grad()
def qk_clip_(model: torch.nn.Module, tau: float) -> int:
    """Rescale the q/k weights of every head whose recorded max logit exceeds ``tau``; returns
    how many heads were clipped. Needs ``model.set_record_max_logits(True)`` before forward."""
    clipped = 0
    for _, attn in model.attention_modules():
        s = attn.max_logits
        if s is None or not isinstance(attn, MLA):
            continue
        gamma = (tau / s.clamp(min=1e-30)).clamp(max=1.0)
        hit = gamma < 1
        if not hit.any():
            continue
        clipped += int(hit.sum())
        root = gamma.sqrt()[:, None, None]
        q = attn.linear_q_proj if attn.cfg.q_lora_rank is None else attn.linear_q_up_proj
        wq = q.weight.view(attn.num_heads, attn.qk + attn.rope, -1)
        wq[:, : attn.qk] *= root.to(wq.dtype)
        wq[:, attn.qk :] *= gamma[:, None, None].to(wq.dtype)
        wkv = attn.linear_kv_up_proj.weight.view(attn.num_heads, attn.qk + attn.v, -1)
        wkv[:, : attn.qk] *= root.to(wkv.dtype)
        attn.max_logits = attn.max_logits * torch.where(hit, gamma, torch.ones_like(gamma))
    return clipped
