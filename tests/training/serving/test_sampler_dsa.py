"""Sampling a DSA model (sparse attention, top-k below the sequence length) with requests that
finish at different times: the sampler drops finished rows from the batch, and every part of the
cache (the indexer keys included) must follow, or decoding crashes or reads another row's keys."""

from __future__ import annotations

import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.model.mla import LatentCache
from training.rl.algo.losses import pad_rows, token_logprobs
from training.serving.sampler import SamplingParams, sample

VOCAB = 40
TOPK = 3  # far below prompt + completion lengths (up to 14), so the sparse path selects


@pytest.fixture(scope="module")
def model() -> GLMModel:
    torch.manual_seed(0)
    cfg = tiny_model(
        vocab_size=VOCAB,
        mtp_num_layers=None,
        init_method_std=0.2,
        dsa_indexer_n_heads=2,
        dsa_indexer_head_dim=16,
        dsa_indexer_topk=TOPK,
    )
    return GLMModel(cfg).double()  # float64: sparse top-k ties cannot flip between paths


PROMPTS = [[3, 7, 9, 1, 4, 2, 2], [5], [8, 8, 2, 6], [11, 12]]
# different budgets: rows leave the batch after 2, 4, 6 and 7 steps (in a shuffled order)
BUDGETS = [4, 7, 2, 6]


def test_rows_finishing_at_different_times_equal_each_alone(model):
    params = [SamplingParams(temperature=0, max_tokens=b) for b in BUDGETS]
    together = sample(model, PROMPTS, params)
    assert [len(o.tokens) for o in together] == BUDGETS
    for p, prm, t in zip(PROMPTS, params, together, strict=True):
        alone = sample(model, [p], prm)[0]
        assert alone.tokens == t.tokens
        torch.testing.assert_close(torch.tensor(alone.logprobs), torch.tensor(t.logprobs), atol=1e-6, rtol=0)  # logits are picked in float32


def test_dsa_sampled_logprobs_equal_the_training_forward(model):
    g = torch.Generator().manual_seed(1)
    params = [SamplingParams(temperature=0.8, max_tokens=b) for b in BUDGETS]
    outs = sample(model, PROMPTS, params, generator=g)
    rows = [p + o.tokens for p, o in zip(PROMPTS, outs, strict=True)]
    assert max(map(len, rows)) > TOPK * 3
    tokens, doc_lens = pad_rows(rows)
    with torch.no_grad():
        logp = token_logprobs(model, tokens, doc_lens, temperature=0.8)
    for i, (p, o) in enumerate(zip(PROMPTS, outs, strict=True)):
        want = logp[i, len(p) : len(p) + len(o.tokens)]
        torch.testing.assert_close(torch.tensor(o.logprobs, dtype=want.dtype), want, atol=1e-5, rtol=0)


def test_cache_select_keeps_every_field():
    c = LatentCache(torch.randn(3, 5, 4), torch.randn(3, 5, 2), torch.randn(3, 5, 6))
    rows = torch.tensor([2, 0])
    s = c.select(rows)
    assert torch.equal(s.c_kv, c.c_kv[rows]) and torch.equal(s.k_rope, c.k_rope[rows])
    assert torch.equal(s.k_index, c.k_index[rows])
    assert LatentCache(c.c_kv, c.k_rope).select(rows).k_index is None
