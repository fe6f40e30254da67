"""DSA (DeepSeek sparse attention) in our MLA: exactness, sparsity, decode, indexer training, config."""

from __future__ import annotations

import pytest
import torch
import yaml

from core.errors import ConfigError
from tests.training.glm_tiny import tiny_model
from training.model.doc_mask import document_causal_mask, document_positions, segment_ids
from training.model.glm import GLMModel
from training.model.mla import MLA

DSA = {
    "dsa_indexer_n_heads": 2,
    "dsa_indexer_head_dim": 16,
    "dsa_indexer_topk": 4,
    "dsa_indexer_loss_coeff": 1.0,
}
DOCS = [torch.tensor([9, 15]), torch.tensor([24])]  # two packed documents in row 0


def model(topk: int, seed: int = 0) -> GLMModel:
    torch.manual_seed(seed)
    m = GLMModel(tiny_model(vocab_size=50, **{**DSA, "dsa_indexer_topk": topk})).double()
    with torch.no_grad():  # a non-trivial indexer, so the top-k really differs from "all"
        for name, p in m.named_parameters():
            if ".indexer." in name and p.ndim == 2:
                p.normal_(std=0.3)
    return m.eval()


TOKENS = torch.randint(0, 50, (2, 24), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("topk", [24, 2048])  # = the sequence, and GLM-5's 2048 on 24 tokens
def test_topk_at_least_the_sequence_equals_dense_attention(topk):
    m = model(topk=topk)  # every allowed key selected (the sparse gather path still runs)
    with torch.no_grad():
        sparse = m(TOKENS, DOCS)
        m.set_dsa_dense(True)
        dense = m(TOKENS, DOCS)
    assert (sparse - dense).abs().max() < 1e-12  # float64: equal up to summation order


def reference_sparse_attention(attn: MLA, x, positions, mask):
    """Megatron's unfused DSA written out: dense per-head scores, -inf outside the indexer's
    top-k (and outside the document-causal mask), softmax, weighted sum of per-head values."""
    from training.model.dsa import index_scores
    from training.model.mla import apply_rope, rope_cos_sin

    B, L, _ = x.shape
    cos, sin = rope_cos_sin(positions, attn.rope, attn.cfg.rotary_base)
    q_nope, q_rope, qr = attn._queries(x, cos, sin)
    c_kv, k_rope = attn._latent(x, cos, sin)
    k_nope, v = attn.linear_kv_up_proj(c_kv).view(B, L, attn.num_heads, -1).split([attn.qk, attn.v], -1)
    qi, ki, wi = attn.indexer(x, qr, lambda t: apply_rope(t, cos, sin))
    allowed = mask[:, 0]
    # highest scores first, ties to the earlier position (training.model.dsa.select_topk's rule)
    idx = index_scores(qi, ki, wi, allowed).sort(dim=-1, descending=True, stable=True).indices
    idx = idx[..., : attn.cfg.dsa_indexer_topk]
    keep = torch.zeros_like(allowed).scatter_(-1, idx, True) & allowed
    s = torch.einsum("bthd,bshd->bhts", q_nope, k_nope) + torch.einsum("bthr,bsr->bhts", q_rope, k_rope)
    p = (s * attn.scale).masked_fill(~keep[:, None], float("-inf")).softmax(-1)
    out = torch.einsum("bhts,bshv->bthv", p, v).reshape(B, L, -1)
    return attn.linear_proj(out), keep


def test_each_query_attends_to_its_top_k_only():
    m = model(topk=4)
    attn = m.decoder.layers[1].self_attention
    x = torch.randn(2, 24, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    seg = segment_ids(DOCS, 24)
    positions, mask = document_positions(seg), document_causal_mask(seg)
    with torch.no_grad():
        got = attn(x, positions, mask)
        want, keep = reference_sparse_attention(attn, x, positions, mask)
        attn.dsa_dense = True
        dense = attn(x, positions, mask)
    assert keep.sum(-1).max() == 4 and (keep.sum(-1) == mask[:, 0].sum(-1).clamp(max=4)).all()
    assert (got - want).abs().max() < 1e-12
    assert (got - dense).abs().max() > 1e-3  # sparsity changes the output


def test_cached_decode_selects_like_the_training_path():
    m = model(topk=4)
    toks = TOKENS[:, :12]
    with torch.no_grad():
        full = m(toks, [torch.tensor([12])] * 2)
        logits, caches = m.decode(toks[:, :5])
        steps = [logits]
        for t in range(5, 12):
            logits, caches = m.decode(toks[:, t : t + 1], caches)
            steps.append(logits)
    assert caches[0].k_index.shape == (2, 12, 16)  # the indexer key is cached with the latent
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-8  # the MoE router scores in fp32


@pytest.mark.parametrize("sparse_loss", [False, True])
def test_indexer_learns_the_attention_distribution(sparse_loss):
    """Only the indexer gets gradients from its KL, and the KL falls (dense warm-up, then the
    sparse stage's KL over the selected keys)."""
    torch.manual_seed(0)
    cfg = tiny_model(vocab_size=50, **DSA, dsa_indexer_use_sparse_loss=sparse_loss)
    attn = MLA(cfg)
    attn.dsa_dense = not sparse_loss
    x = torch.randn(2, 24, 32, generator=torch.Generator().manual_seed(0))
    seg = segment_ids(DOCS, 24)
    positions, mask = document_positions(seg), document_causal_mask(seg)
    with torch.no_grad():  # peaked attention, so there is something to learn
        attn.linear_q_up_proj.weight.mul_(8)
    opt = torch.optim.Adam(attn.indexer.parameters(), lr=3e-2)
    kls = []
    for _ in range(15):
        attn.indexer_loss = None
        attn(x, positions, mask)
        opt.zero_grad()
        attn.indexer_loss.backward()
        kls.append(float(attn.indexer_loss))
        opt.step()
    assert attn.linear_q_up_proj.weight.grad is None and attn.linear_kv_up_proj.weight.grad is None
    assert kls[-1] < 0.5 * kls[0], kls


def test_model_loss_reports_the_indexer_kl():
    m = model(topk=4).float().train()
    out = m.loss(TOKENS, DOCS)
    assert out["indexer_loss"] > 0 and torch.isfinite(out["loss"])


@pytest.mark.parametrize(
    "change,field",
    [
        ({"dsa_indexer_n_heads": 4, "dsa_indexer_head_dim": 32}, "model.dsa_indexer_topk"),
        ({**DSA, "dsa_indexer_head_dim": 16, "qk_pos_emb_head_dim": 16}, "model.dsa_indexer_head_dim"),
        ({"dsa_indexer_topk": 8}, "model.dsa_indexer_topk"),  # no indexer: the model would ignore it
        ({"multi_latent_attention": False, "num_query_groups": 2, "kv_lora_rank": 64}, "model.kv_lora_rank"),
        ({"rotary_percent": 0.5}, "model.rotary_percent"),  # GQA-only: MLA ignores it
        ({"qk_l2_norm": True}, "model.qk_l2_norm"),  # a Megatron field we do not build
    ],
)
def test_fields_the_model_would_not_honour_are_errors(tmp_path, change, field):
    from training.train_config import load_trainer_config

    data = {"model": {"num_attention_heads": 4, **change}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(Exception) as err:
        load_trainer_config(path)
    assert field in str(err.value)


def test_dense_warmup_needs_the_indexer_loss(tmp_path):
    from training.train_config import load_trainer_config

    path = tmp_path / "t.yaml"
    model = {**DSA, "dsa_indexer_head_dim": 32, "dsa_indexer_loss_coeff": 0.0}
    path.write_text(yaml.safe_dump({"dsa_warmup_steps": 5, "model": model}))
    with pytest.raises(ConfigError, match="dsa_warmup_steps"):
        load_trainer_config(path)


def test_trainer_dense_warmup_then_sparse(small_shards):
    """``dsa_warmup_steps``: dense attention and only the indexer moves; then the sparse stage."""
    from tests.training.glm_tiny import tiny_trainer
    from training.train_config import build_model, resolve_stages
    from training.trainer import train

    cfg = tiny_trainer(steps=3, **{**DSA, "dsa_indexer_head_dim": 24, "dsa_indexer_topk": 32})
    cfg.dsa_warmup_steps = 2
    start = build_model(cfg, resolve_stages(cfg, small_shards["dir"])).state_dict()
    warm = train(cfg, small_shards["dir"], log=lambda m: None, stop_after=2)
    assert [m["dsa"] for m in warm.metrics] == ["dense_warmup"] * 2
    moved = {n for n, t in warm.model.state_dict().items() if not torch.equal(t, start[n])}
    assert moved and all(".indexer." in n for n in moved), sorted(moved)[:5]
    full = train(cfg, small_shards["dir"], log=lambda m: None)
    assert [m["dsa"] for m in full.metrics] == ["dense_warmup"] * 2 + ["sparse"]
    assert all(m["indexer_loss"] > 0 for m in full.metrics)
    # a run without warm-up (mid-training from a warmed-up checkpoint) still says its mode on every step
    cfg.dsa_warmup_steps = 0
    assert [m["dsa"] for m in train(cfg, small_shards["dir"], log=lambda m: None).metrics] == ["sparse"] * 3
