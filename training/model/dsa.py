"""DeepSeek sparse attention (DSA, DeepSeek-V3.2; GLM-5 carries it): lightning indexer + top-k MLA.

The indexer (Megatron-core's ``DSAIndexer`` names and layout) gives every (query t, key s) pair a
cheap score ``I(t, s) = sum_h w_{t,h} * ReLU(q_{t,h} . k_s)``: ``linear_wq_b`` maps the query
latent to ``n_heads`` small queries, ``linear_wk`` + LayerNorm ``k_norm`` give ONE key per token
shared by all indexer heads, ``linear_weights_proj`` gives the per-head weights (scaled by
``n_heads^-1/2 * head_dim^-1/2``). The last ``qk_pos_emb_head_dim`` dims of the indexer queries and
keys carry RoPE (Megatron's [nope, rope] order). Each query then attends, through MLA, only to
the ``dsa_indexer_topk`` allowed keys with the highest index scores.

Left out on purpose: the Hadamard rotation DeepSeek (and Megatron) apply to indexer q and k
before an FP8 product. It is orthonormal, so it leaves ``q . k`` unchanged and matters only for
FP8 quantization error, which this code does not use (bf16/fp32 products).

Sparse attention runs in MLA's absorbed (MQA-over-the-latent) form, as DeepSeek's sparse
kernel does: the selected tokens' normalized latent ``c_kv`` and RoPE key are gathered ONCE for
all heads (``kv_lora + rope`` numbers per token), queries are folded through W_UK, outputs
through W_UV. Queries are processed in blocks so no ``L x L`` tensor of attention is formed; the
indexer's ``L x L`` scores are formed per block too.

Training follows DeepSeek-V3.2: a dense warm-up (dense attention; the indexer learns
KL(target || softmax(I)) where the target is the main attention's probabilities summed over
heads and L1-normalized), then the sparse stage (attention over the top-k; with
``dsa_indexer_use_sparse_loss`` the KL is taken over the selected keys only). The indexer's
inputs are detached and the target carries no gradient, so the KL trains the indexer alone and
the language-model loss never reaches it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from training.model.config import ModelConfig

NEG_INF = float("-inf")


class Indexer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        nh, hd = cfg.dsa_indexer_n_heads, cfg.dsa_indexer_head_dim
        self.n_heads, self.head_dim, self.rope = nh, hd, cfg.qk_pos_emb_head_dim
        self.topk = cfg.dsa_indexer_topk
        self.linear_wq_b = nn.Linear(cfg.q_lora_rank or cfg.hidden_size, nh * hd, bias=False)
        self.linear_wk = nn.Linear(cfg.hidden_size, hd, bias=False)
        self.k_norm = nn.LayerNorm(hd, eps=cfg.dsa_indexer_layernorm_epsilon or cfg.layernorm_epsilon)
        self.linear_weights_proj = nn.Linear(cfg.hidden_size, nh, bias=False)

    def _rope(self, x: torch.Tensor, rotate: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        nope, pe = x.split([self.head_dim - self.rope, self.rope], -1)
        return torch.cat((nope, rotate(pe)), -1)

    def forward(
        self, x: torch.Tensor, qr: torch.Tensor, rotate: Callable[[torch.Tensor], torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(queries [B, L, nh, hd], keys [B, L, hd], head weights [B, L, nh]) for x [B, L, hidden]
        and the query latent qr [B, L, q_lora] (x itself without query compression); ``rotate``
        is the attention's RoPE at these positions ([B, L, heads, rope] -> same)."""
        B, L, _ = x.shape
        q = self._rope(self.linear_wq_b(qr).view(B, L, self.n_heads, self.head_dim), rotate)
        k = self._rope(self.k_norm(self.linear_wk(x))[:, :, None], rotate)[:, :, 0]
        w = self.linear_weights_proj(x) * (self.n_heads**-0.5 * self.head_dim**-0.5)
        return q, k, w


def index_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """I(t, s) = sum_h w[t,h] ReLU(q[t,h] . k[s]) in >= fp32, -inf where ``allowed`` [B, T, S] is false.
    q [B, T, nh, hd], k [B, S, hd], w [B, T, nh] -> [B, T, S]."""
    dt = torch.promote_types(q.dtype, torch.float32)  # at least fp32; float64 stays float64
    B, T, nh, hd = q.shape
    s = torch.relu(q.to(dt).reshape(B, T * nh, hd) @ k.to(dt).transpose(1, 2))  # [B, T*nh, S]
    s = (w.to(dt).reshape(B * T, 1, nh) @ s.view(B * T, nh, -1)).view(B, T, -1)  # weighted head sum
    return s.masked_fill(~allowed, NEG_INF)


def select_topk(scores: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k key indices per query [B, T, k'] (k' = min(topk, S)) and which of them are allowed
    (a query with fewer than k' allowed keys gets -inf picks, masked out).

    Ties are common (ReLU makes many scores exactly 0) and ``torch.topk`` breaks them
    differently for rows of different lengths, so the training path (S = L) and cached decoding
    (S grows) could pick different keys; a stable sort breaks ties by position, the same way
    in both, so sampled tokens and their training-time log-probabilities agree."""
    k = min(topk, scores.shape[-1])
    if k == scores.shape[-1]:
        idx = torch.arange(k, device=scores.device).expand(scores.shape)
        return idx, scores > NEG_INF
    vals, idx = scores.topk(k, dim=-1)
    thr = vals[..., -1:]
    tied = scores == thr
    if not ((tied.sum(-1, keepdim=True) > 1) & (thr > NEG_INF)).any():
        return idx, vals > NEG_INF  # no finite tie at the k-th value: topk's set is the set
    # everything above the k-th value plus the earliest positions equal to it: the set a stable
    # descending sort would pick, at the cost of a top-k (no full sort)
    above = scores > thr
    room = k - above.sum(-1, keepdim=True)
    keep = above | (tied & (tied.cumsum(-1) <= room))
    idx = keep.nonzero()[:, -1].view(*scores.shape[:-1], k)  # exactly k per row, in position order
    return idx, scores.gather(-1, idx) > NEG_INF


def gather_tokens(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x [B, S, d], idx [B, T, k] -> [B, T, k, d] (per-query selected tokens). Whole rows are
    copied by ``index_select`` (several times faster on CPU than ``gather`` with an expanded
    index, which addresses every element)."""
    B, S, d = x.shape
    rows = idx + (torch.arange(B, device=idx.device) * S).view(B, 1, 1)
    return x.reshape(B * S, d).index_select(0, rows.reshape(-1)).view(*idx.shape, d)


def sparse_mla(
    q_lat: torch.Tensor,
    q_rope: torch.Tensor,
    c_kv: torch.Tensor,
    k_rope: torch.Tensor,
    idx: torch.Tensor,
    valid: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA over each query's selected tokens.

    q_lat [B, T, H, kv_lora] (query folded through W_UK), q_rope [B, T, H, rope], c_kv
    [B, S, kv_lora], k_rope [B, S, rope], idx/valid [B, T, k]. Returns the latent output
    [B, T, H, kv_lora] (apply W_UV after) and the attention probabilities [B, H, T, k]."""
    # one gather of [latent; RoPE key] per selected token, one product with [q_lat; q_rope]
    sel = gather_tokens(torch.cat((c_kv, k_rope), -1), idx)
    c_sel = sel[..., : c_kv.shape[-1]]
    scores = torch.einsum("bthc,btkc->bhtk", torch.cat((q_lat, q_rope), -1), sel)
    # softmax in at least fp32 (bf16 inputs under autocast), float64 stays float64
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    probs = (scores * scale).masked_fill(~valid[:, None], NEG_INF).softmax(-1)
    out = torch.einsum("bhtk,btkc->bthc", probs.to(c_sel.dtype), c_sel)
    return out, probs


def kl_to_attention(target: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Sum over queries of KL(target || softmax(scores)) along the last dim; ``target`` [B, T, S]
    is a distribution (no gradient), ``scores`` [B, T, S] index scores with -inf outside it."""
    logp = scores.log_softmax(-1)
    kl = target * (torch.log(target.clamp_min(1e-10)) - logp.clamp_min(-1e4))
    return kl.masked_fill(target == 0, 0).sum()


def head_mean(probs: torch.Tensor) -> torch.Tensor:
    """[B, H, T, S] attention probabilities -> the indexer's target [B, T, S]: summed over heads,
    L1-normalized (each head's row sums to one, so this is the mean)."""
    return probs.float().mean(1)


def dsa_flops(L: int, heads: int, kv_lora: int, rope: int, nh: int, hd: int, topk: int) -> dict[str, float]:
    """Forward matmul FLOPs of one sequence's attention core (projections excluded), causal.

    dense: scores + weighted sum over (t+1) keys per query in the absorbed form: per key and head
    2*(kv_lora+rope) + 2*kv_lora. sparse: the indexer over (t+1) keys (2*hd*nh + weighting) plus
    the same core over min(topk, t+1) keys."""
    keys = L * (L + 1) / 2
    sparse_keys = sum(min(topk, t + 1) for t in range(L)) if L <= 1 << 17 else keys
    per_key = heads * (2 * (kv_lora + rope) + 2 * kv_lora)
    indexer = keys * nh * (2 * hd + 2)
    return {"dense": keys * per_key, "sparse": indexer + sparse_keys * per_key, "indexer": indexer}
