import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.doc_mask import document_causal_mask, segment_ids
from training.model.glm import GLMModel
from training.model.mla import MLA, apply_rope, rope_cos_sin


def mla64(**kw) -> MLA:
    torch.manual_seed(0)
    return MLA(tiny_model(**kw)).double().eval()


def causal(B: int, L: int) -> torch.Tensor:
    return document_causal_mask(segment_ids([torch.tensor([L])] * B, L))


@pytest.mark.parametrize("q_lora", [16, None])
@pytest.mark.parametrize("absorb", [True, False])
def test_decode_with_latent_cache_equals_training_path(q_lora, absorb):
    attn = mla64(q_lora_rank=q_lora)
    B, L, cfg = 2, 11, attn.cfg
    x = torch.randn(B, L, cfg.hidden_size, dtype=torch.float64)
    pos = torch.arange(L).expand(B, L)
    with torch.no_grad():
        full = attn(x, pos, causal(B, L))
        outs, cache = [], None
        for chunk in (slice(0, 4), slice(4, 5), slice(5, 11)):  # prefill, one token, a burst
            y, cache = attn.decode(x[:, chunk], pos[:, chunk], cache, absorb=absorb)
            outs.append(y)
    assert torch.allclose(torch.cat(outs, 1), full, atol=1e-10)
    # the cache is the latent plus the shared RoPE key: kv_lora + rope numbers per token
    assert cache.length == L and cache.numbers_per_token == cfg.kv_lora_rank + cfg.qk_pos_emb_head_dim


def test_rope_is_a_relative_rotation():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(pq: int, pk: int) -> float:
        cq, sq = rope_cos_sin(torch.tensor([[pq]]), 16, 10000.0)
        ck, sk = rope_cos_sin(torch.tensor([[pk]]), 16, 10000.0)
        return float((apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum())

    assert abs(score(7, 3) - score(104, 100)) < 1e-4
    assert abs(score(7, 3) - score(7, 5)) > 1e-3
    assert abs(score(0, 0) - float((q * k).sum())) < 1e-5  # position 0 is the identity


def test_fused_kv_up_proj_holds_w_uk_then_w_uv_per_head():
    attn = mla64()
    cfg = attn.cfg
    c = torch.randn(3, cfg.kv_lora_rank, dtype=torch.float64)
    kv = attn.linear_kv_up_proj(c).view(3, cfg.num_attention_heads, cfg.qk_head_dim + cfg.v_head_dim)
    w_uk, w_uv = attn._w_uk_uv()
    for h in range(cfg.num_attention_heads):
        assert torch.allclose(kv[:, h, : cfg.qk_head_dim], c @ w_uk[h].T)
        assert torch.allclose(kv[:, h, cfg.qk_head_dim :], c @ w_uv[h].T)
    blocks = attn.up_proj_blocks()
    assert blocks["linear_kv_up_proj.weight"] == (cfg.num_attention_heads, [cfg.qk_head_dim, cfg.v_head_dim])
    assert blocks["linear_q_up_proj.weight"] == (cfg.num_attention_heads, [cfg.q_head_dim])


def test_model_decode_matches_forward_and_documents_stay_apart():
    torch.manual_seed(0)
    model = GLMModel(tiny_model(vocab_size=50)).double().eval()
    toks = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        full = model(toks, [torch.tensor([12])] * 2)
        a, cache = model.decode(toks[:, :7])
        b, cache = model.decode(toks[:, 7:], cache)
        last, _ = model.decode(toks[:, :7], None, last_only=True)  # a sampler's prefill: the head on the last only
    assert torch.allclose(torch.cat((a, b), 1), full, atol=1e-9)
    assert last.shape == (2, 1, 50) and torch.allclose(last, a[:, -1:], atol=1e-12)

    # packed: doc 2 (positions 5..11) gives the same logits as when it is alone (positions restart)
    with torch.no_grad():
        packed = model(toks[:1], [torch.tensor([5, 7])])
        alone = model(toks[:1, 5:], [torch.tensor([7])])
        changed = toks[:1].clone()
        changed[0, :5] = (changed[0, :5] + 1) % 50
        other = model(changed, [torch.tensor([5, 7])])
    assert torch.allclose(packed[0, 5:], alone[0], atol=1e-9)
    assert torch.allclose(other[0, 5:], packed[0, 5:], atol=1e-9)
    assert not torch.allclose(other[0, :5], packed[0, :5])


def test_max_logits_recorded_per_head():
    attn = mla64()
    attn.record_max_logits = True
    x = torch.randn(1, 6, attn.cfg.hidden_size, dtype=torch.float64)
    with torch.no_grad():
        attn(x, torch.arange(6)[None], causal(1, 6))
    assert attn.max_logits.shape == (attn.cfg.num_attention_heads,)
    # recompute head 0's largest causal logit directly
    cos, sin = rope_cos_sin(torch.arange(6)[None], attn.rope, attn.cfg.rotary_base)
    qn, qr, _ = attn._queries(x, cos, sin)
    c, kr = attn._latent(x, cos, sin)
    w_uk, _ = attn._w_uk_uv()
    s = (qn[0, :, 0] @ (c[0] @ w_uk[0].T).T + qr[0, :, 0] @ kr[0].T) * attn.scale
    s = s.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    assert torch.isclose(attn.max_logits[0].double(), s.max(), atol=1e-6)
