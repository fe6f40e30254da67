"""Multi-latent attention (MLA) with Megatron-core's weight layout, plus a KV-cached decode path.

Weights, named as in Megatron's ``MLASelfAttention`` (nn.Linear layout, [out, in]):
``linear_q_down_proj`` [q_lora, hidden] -> ``q_layernorm`` -> ``linear_q_up_proj``
[H*(qk+rope), q_lora] (rows of head h: W_UQ_h then the RoPE query slice);
``linear_kv_down_proj`` [kv_lora+rope, hidden] (the latent c_kv, then the shared RoPE key) ->
``kv_layernorm`` on c_kv -> ``linear_kv_up_proj`` [H*(qk+v), kv_lora], fused like Megatron:
rows of head h are W_UK_h ([qk, kv_lora]) then W_UV_h ([v, kv_lora]); ``linear_proj``
[hidden, H*v]. MuonSplit orthogonalizes exactly these per-head row blocks
(``up_proj_blocks``).

RoPE follows Megatron's MLA convention (the rope dims are de-interleaved to [even, odd]
before the rotate-half rotation), so a converted state dict gives the same logits there.

Decoding caches only the normalized latent c_kv and the rotated RoPE key — kv_lora + rope
numbers per token (576 for GLM-5) — and absorbs W_UK into the query and W_UV into the
output, so per-head keys and values are never materialized.

With ``dsa_indexer_n_heads`` set, the layer owns a DSA lightning indexer (``training/model/dsa.py``):
in the sparse stage every query attends to its top-``dsa_indexer_topk`` keys only (training
and decoding, whose cache then also holds the indexer key, ``dsa_indexer_head_dim`` numbers per
token); ``dsa_dense = True`` is the dense warm-up. The KL that trains the indexer is left in
``indexer_loss`` (summed over the layer's calls since the model last reset it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from training.model import dsa
from training.model.config import ModelConfig


def rope_cos_sin(positions: torch.Tensor, dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of shape positions.shape + (dim,), Megatron's ``cat(freqs, freqs)`` layout."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim))
    freqs = positions.to(torch.float32)[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mla: bool = True) -> torch.Tensor:
    """Rotate ``x`` [B, L, H, d] by position; cos/sin are [B, L, d]. ``mla`` de-interleaves
    first, as Megatron does for MLA (its ``multi_latent_attention`` rope flag)."""
    if mla:
        x = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    cos, sin = cos[:, :, None].to(x.dtype), sin[:, :, None].to(x.dtype)
    return x * cos + rotated * sin


@torch.no_grad()
def _max_logits(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, scale: float, block: int = 1024
) -> torch.Tensor:
    """Largest allowed pre-softmax logit per head, [H]; query blocks bound the memory."""
    best = torch.full((q.shape[1],), float("-inf"), device=q.device)
    for i in range(0, q.shape[2], block):
        s = (q[:, :, i : i + block] @ k.transpose(-2, -1)).float() * scale
        s = s.masked_fill(~mask[:, :, i : i + block], float("-inf"))
        best = torch.maximum(best, s.amax(dim=(0, 2, 3)))
    return best


@dataclass
class LatentCache:
    """Per-layer decode cache: normalized latent c_kv [B, S, kv_lora] and roped key [B, S, rope]."""

    c_kv: torch.Tensor
    k_rope: torch.Tensor
    k_index: torch.Tensor | None = None  # DSA indexer keys [B, S, head_dim]

    @property
    def length(self) -> int:
        return self.c_kv.shape[1]

    @property
    def numbers_per_token(self) -> int:
        n = self.c_kv.shape[-1] + self.k_rope.shape[-1]
        return n + (self.k_index.shape[-1] if self.k_index is not None else 0)

    def select(self, rows: torch.Tensor) -> LatentCache:
        """The cache of batch rows ``rows`` only (a sampler dropping finished requests). Every
        per-token field is selected, so a field added here cannot be silently lost by callers."""
        pick = {f.name: getattr(self, f.name) for f in fields(self)}
        return type(self)(**{k: v[rows] if v is not None else None for k, v in pick.items()})


class MLA(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        H, qk, rope, v = cfg.num_attention_heads, cfg.qk_head_dim, cfg.qk_pos_emb_head_dim, cfg.v_head_dim
        self.num_heads, self.qk, self.rope, self.v = H, qk, rope, v
        eps = cfg.qk_norm_eps
        if cfg.q_lora_rank is None:
            self.linear_q_proj = nn.Linear(cfg.hidden_size, H * (qk + rope), bias=False)
        else:
            self.linear_q_down_proj = nn.Linear(cfg.hidden_size, cfg.q_lora_rank, bias=False)
            self.q_layernorm = nn.RMSNorm(cfg.q_lora_rank, eps=eps) if cfg.qk_layernorm else nn.Identity()
            self.linear_q_up_proj = nn.Linear(cfg.q_lora_rank, H * (qk + rope), bias=False)
        self.linear_kv_down_proj = nn.Linear(cfg.hidden_size, cfg.kv_lora_rank + rope, bias=False)
        self.kv_layernorm = nn.RMSNorm(cfg.kv_lora_rank, eps=eps) if cfg.qk_layernorm else nn.Identity()
        self.linear_kv_up_proj = nn.Linear(cfg.kv_lora_rank, H * (qk + v), bias=False)
        self.linear_proj = nn.Linear(H * v, cfg.hidden_size, bias=False)
        self.scale = (qk + rope) ** -0.5
        # set by the trainer when QK-clip or logging needs it; then max_logits holds the
        # largest pre-softmax logit per head of the last forward
        self.record_max_logits = False
        self.max_logits: torch.Tensor | None = None
        self.indexer = dsa.Indexer(cfg) if cfg.dsa_indexer_n_heads else None
        self.dsa_dense = False  # DSA dense warm-up: dense attention, indexer still trained
        self.dsa_block = 256  # queries per block on the sparse path (bounds the gathered memory)
        self.indexer_loss: torch.Tensor | None = None

    # -- pieces shared by both paths ----------------------------------------------------------
    def up_proj_blocks(self) -> dict[str, tuple[int, list[int]]]:
        """Per-head row blocks of the up-projections (for MuonSplit): name -> (heads, rows per
        block inside one head's slice). W_UQ keeps a head's RoPE query rows with it."""
        q_name = "linear_q_proj.weight" if self.cfg.q_lora_rank is None else "linear_q_up_proj.weight"
        return {
            q_name: (self.num_heads, [self.qk + self.rope]),
            "linear_kv_up_proj.weight": (self.num_heads, [self.qk, self.v]),
        }

    def _queries(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_nope, roped q_rope, the query latent the DSA indexer reads: x without q_lora)."""
        B, L, _ = x.shape
        if self.cfg.q_lora_rank is None:
            qr = x
            q = self.linear_q_proj(x)
        else:
            qr = self.q_layernorm(self.linear_q_down_proj(x))
            q = self.linear_q_up_proj(qr)
        q_nope, q_rope = q.view(B, L, self.num_heads, self.qk + self.rope).split([self.qk, self.rope], -1)
        return q_nope, apply_rope(q_rope, cos, sin), qr

    def _latent(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        c_kv, k_rope = self.linear_kv_down_proj(x).split([self.cfg.kv_lora_rank, self.rope], -1)
        k_rope = apply_rope(k_rope[:, :, None], cos, sin)[:, :, 0]
        return self.kv_layernorm(c_kv), k_rope

    def _w_uk_uv(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.linear_kv_up_proj.weight.view(self.num_heads, self.qk + self.v, -1)
        return w[:, : self.qk], w[:, self.qk :]  # [H, qk, kv_lora], [H, v, kv_lora]

    # -- training path ------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, L, hidden]; positions [B, L] (restart per document); mask [B, 1, L, L] bool."""
        B, L, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.rope, self.cfg.rotary_base)
        q_nope, q_rope, qr = self._queries(x, cos, sin)
        c_kv, k_rope = self._latent(x, cos, sin)
        kv = self.linear_kv_up_proj(c_kv).view(B, L, self.num_heads, self.qk + self.v)
        k_nope, v = kv.split([self.qk, self.v], -1)
        q = torch.cat((q_nope, q_rope), -1).transpose(1, 2)
        k = torch.cat((k_nope, k_rope[:, :, None].expand(-1, -1, self.num_heads, -1)), -1).transpose(1, 2)
        if self.record_max_logits:
            # with DSA: the largest over all allowed keys, an upper bound of the selected ones
            self.max_logits = _max_logits(q, k, mask, self.scale)
        if self.indexer is not None:
            index = self.indexer(x.detach(), qr.detach(), lambda t: apply_rope(t, cos, sin))
            if not self.dsa_dense:
                return self._sparse(q_nope, q_rope, c_kv, k_rope, index, mask)
            if self._train_indexer():
                self._dense_indexer_loss(q.detach(), k.detach(), index, mask)
        # q/k and v widths differ in MLA, which sends SDPA to its O(L^2)-memory math kernel;
        # zero-padding them to one width (scores and outputs unchanged) selects the flash kernel
        d = max(q.shape[-1], self.v)
        pad = d - q.shape[-1]
        q, k = (F.pad(q, (0, pad)), F.pad(k, (0, pad))) if pad else (q, k)
        v = F.pad(v, (0, d - self.v)).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)[..., : self.v]
        return self.linear_proj(out.transpose(1, 2).reshape(B, L, self.num_heads * self.v))

    # -- DSA --------------------------------------------------------------------------------------
    def _train_indexer(self) -> bool:
        return self.training and torch.is_grad_enabled() and self.cfg.dsa_indexer_loss_coeff > 0

    def _add_indexer_loss(self, kl: torch.Tensor) -> None:
        self.indexer_loss = kl if self.indexer_loss is None else self.indexer_loss + kl

    def _dense_indexer_loss(self, q: torch.Tensor, k: torch.Tensor, index, mask: torch.Tensor) -> None:
        """Warm-up KL: the indexer's distribution over all allowed keys toward the dense one."""
        qi, ki, wi = index
        B, _, L, _ = q.shape
        kl = q.new_zeros((), dtype=torch.float32)
        for t0 in range(0, L, self.dsa_block):
            t1 = min(t0 + self.dsa_block, L)
            allowed = mask[:, 0, t0:t1]
            with torch.no_grad():
                s = (q[:, :, t0:t1] @ k.transpose(-2, -1)).float() * self.scale
                target = dsa.head_mean(s.masked_fill(~allowed[:, None], float("-inf")).softmax(-1))
            kl = kl + dsa.kl_to_attention(target, dsa.index_scores(qi[:, t0:t1], ki, wi[:, t0:t1], allowed))
        self._add_indexer_loss(kl / (B * L))

    def _sparse(self, q_nope, q_rope, c_kv, k_rope, index, mask: torch.Tensor) -> torch.Tensor:
        """Sparse stage: each query attends to its top-k allowed keys (absorbed MLA, query blocks)."""
        qi, ki, wi = index
        B, L = q_nope.shape[:2]
        w_uk, w_uv = self._w_uk_uv()
        q_lat = torch.einsum("blhd,hdc->blhc", q_nope, w_uk)
        train, sparse_loss = self._train_indexer(), self.cfg.dsa_indexer_use_sparse_loss
        outs, kl = [], q_nope.new_zeros((), dtype=torch.float32)
        for t0 in range(0, L, self.dsa_block):
            t1 = min(t0 + self.dsa_block, L)
            allowed = mask[:, 0, t0:t1]
            scores = dsa.index_scores(qi[:, t0:t1], ki, wi[:, t0:t1], allowed)
            idx, valid = dsa.select_topk(scores.detach(), self.cfg.dsa_indexer_topk)
            out_lat, probs = dsa.sparse_mla(
                q_lat[:, t0:t1], q_rope[:, t0:t1], c_kv, k_rope, idx, valid, self.scale
            )
            outs.append(torch.einsum("bthc,hvc->bthv", out_lat, w_uv))
            if not train:
                continue
            if sparse_loss:  # over the selected keys only
                picked = scores.gather(-1, idx).masked_fill(~valid, float("-inf"))
                kl = kl + dsa.kl_to_attention(dsa.head_mean(probs.detach()), picked)
            else:  # over all allowed keys, against the dense distribution
                with torch.no_grad():
                    s = torch.einsum("bthc,bsc->bhts", q_lat[:, t0:t1], c_kv)
                    s = (s + torch.einsum("bthr,bsr->bhts", q_rope[:, t0:t1], k_rope)).float() * self.scale
                    target = dsa.head_mean(s.masked_fill(~allowed[:, None], float("-inf")).softmax(-1))
                kl = kl + dsa.kl_to_attention(target, scores)
        if train:
            self._add_indexer_loss(kl / (B * L))
        out = torch.cat(outs, 1)
        return self.linear_proj(out.reshape(B, L, self.num_heads * self.v))

    # -- decode path ----------------------------------------------------------------------------
    def decode(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        cache: LatentCache | None,
        absorb: bool = True,
        key_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, LatentCache]:
        """Attend ``x`` [B, T, hidden] (the next T tokens of one document per row) to the cache
        plus themselves, causally; returns the output and the grown cache.

        ``absorb=True`` scores queries against the latent directly (W_UK folded into the query,
        W_UV applied after the weighted sum); ``absorb=False`` re-expands per-head keys and
        values from the cache, for comparison. Both equal the training path.

        ``key_mask`` [B, S] (S = cache length after this call), True where a position is a real
        token: batched decoding of prompts of different lengths left-pads them and hides the
        pads. A query always sees itself, so a pad query's output stays finite (never NaN
        poisoning the cache of later layers)."""
        B, T, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.rope, self.cfg.rotary_base)
        q_nope, q_rope, qr = self._queries(x, cos, sin)
        c_new, kr_new = self._latent(x, cos, sin)
        ki_new = None
        if self.indexer is not None:
            qi, ki_new, wi = self.indexer(x, qr, lambda t: apply_rope(t, cos, sin))
        if cache is not None:
            c_new = torch.cat((cache.c_kv, c_new), 1)
            kr_new = torch.cat((cache.k_rope, kr_new), 1)
            if ki_new is not None:
                ki_new = torch.cat((cache.k_index, ki_new), 1)
        cache = LatentCache(c_new, kr_new, ki_new)
        S = cache.length
        # query t (absolute index S-T+t) sees cache positions <= its own
        causal = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
        if key_mask is not None:
            itself = torch.zeros(T, S, dtype=torch.bool, device=x.device)
            itself[torch.arange(T), torch.arange(S - T, S)] = True
            causal = (causal & key_mask[:, None, None, :].bool()) | itself  # [B, 1, T, S]
        w_uk, w_uv = self._w_uk_uv()
        if self.indexer is not None and not self.dsa_dense:  # sparse: top-k of the cache per query
            allowed = causal.expand(B, T, S) if causal.dim() == 2 else causal[:, 0]
            idx, valid = dsa.select_topk(dsa.index_scores(qi, ki_new, wi, allowed), self.cfg.dsa_indexer_topk)
            q_lat = torch.einsum("bthd,hdc->bthc", q_nope, w_uk)
            out_lat, _ = dsa.sparse_mla(q_lat, q_rope, cache.c_kv, cache.k_rope, idx, valid, self.scale)
            out = torch.einsum("bthc,hvc->bthv", out_lat.to(w_uv.dtype), w_uv)
        elif absorb:
            q_lat = torch.einsum("bthd,hdc->bthc", q_nope, w_uk)  # [B, T, H, kv_lora]
            scores = torch.einsum("bthc,bsc->bhts", q_lat, cache.c_kv)
            scores = scores + torch.einsum("bthr,bsr->bhts", q_rope, cache.k_rope)
            probs = (scores * self.scale).masked_fill(~causal, float("-inf")).softmax(-1)
            out_lat = torch.einsum("bhts,bsc->bthc", probs, cache.c_kv)
            out = torch.einsum("bthc,hvc->bthv", out_lat, w_uv)
        else:
            k_nope = torch.einsum("bsc,hdc->bshd", cache.c_kv, w_uk)
            v = torch.einsum("bsc,hvc->bshv", cache.c_kv, w_uv)
            scores = torch.einsum("bthd,bshd->bhts", q_nope, k_nope)
            scores = scores + torch.einsum("bthr,bsr->bhts", q_rope, cache.k_rope)
            probs = (scores * self.scale).masked_fill(~causal, float("-inf")).softmax(-1)
            out = torch.einsum("bhts,bshv->bthv", probs, v)
        return self.linear_proj(out.reshape(B, T, self.num_heads * self.v)), cache
