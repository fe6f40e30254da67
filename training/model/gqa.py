"""Grouped-query attention with Megatron-core's fused ``linear_qkv`` layout (GLM-4.5's attention).

Kept next to MLA so the GLM-4.5 config builds and MLA can be compared with GQA-8 on the same
data (the paper's motivation for MuonSplit). ``linear_qkv`` rows are grouped per query group
as Megatron lays them out: for each of G groups, its H/G query heads, then one key head,
then one value head (each ``head_dim`` rows). Optional per-head q/k RMSNorm
(``qk_layernorm``), q/k/v bias (``add_qkv_bias``) and partial RoPE (``rotary_percent``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from training.model.config import ModelConfig
from training.model.mla import _max_logits, apply_rope, rope_cos_sin


class GQA(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.num_heads = cfg.num_attention_heads
        self.groups = cfg.num_query_groups or cfg.num_attention_heads
        self.head_dim = cfg.gqa_head_dim
        self.rot = int(self.head_dim * cfg.rotary_percent)
        rows = (self.num_heads + 2 * self.groups) * self.head_dim
        self.linear_qkv = nn.Linear(cfg.hidden_size, rows, bias=cfg.add_qkv_bias)
        eps = cfg.qk_norm_eps
        self.q_layernorm = nn.RMSNorm(self.head_dim, eps=eps) if cfg.qk_layernorm else nn.Identity()
        self.k_layernorm = nn.RMSNorm(self.head_dim, eps=eps) if cfg.qk_layernorm else nn.Identity()
        self.linear_proj = nn.Linear(self.num_heads * self.head_dim, cfg.hidden_size, bias=False)
        self.scale = self.head_dim**-0.5
        self.record_max_logits = False
        self.max_logits: torch.Tensor | None = None

    def up_proj_blocks(self) -> dict[str, tuple[int, list[int]]]:
        return {}  # no up-projections: MuonSplit treats GQA like plain Muon

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if self.rot == 0:
            return x
        return torch.cat((apply_rope(x[..., : self.rot], cos, sin, mla=False), x[..., self.rot :]), -1)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        per = self.num_heads // self.groups
        qkv = self.linear_qkv(x).view(B, L, self.groups, per + 2, self.head_dim)
        q = qkv[:, :, :, :per].reshape(B, L, self.num_heads, self.head_dim)
        k, v = qkv[:, :, :, per], qkv[:, :, :, per + 1]
        cos, sin = rope_cos_sin(positions, self.rot, self.cfg.rotary_base) if self.rot else (None, None)
        q = self._rope(self.q_layernorm(q), cos, sin).transpose(1, 2)
        k = self._rope(self.k_layernorm(k), cos, sin).transpose(1, 2)
        k, v = k.repeat_interleave(per, 1), v.transpose(1, 2).repeat_interleave(per, 1)
        if self.record_max_logits:
            self.max_logits = _max_logits(q, k, mask, self.scale)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        return self.linear_proj(out.transpose(1, 2).reshape(B, L, self.num_heads * self.head_dim))
