"""The batched sampler: padded batches equal single prompts, logprobs equal a training-path
forward's, stop tokens / max tokens / top-p / greedy behave as documented."""

from __future__ import annotations

import pytest
import torch

from core.errors import UserError
from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.rl.algo.losses import pad_rows, token_logprobs
from training.serving.sampler import SamplingParams, _filter_top_p, sample

VOCAB = 40


@pytest.fixture(scope="module")
def model() -> GLMModel:
    torch.manual_seed(0)
    m = GLMModel(tiny_model(vocab_size=VOCAB, mtp_num_layers=None, init_method_std=0.2))
    return m


def test_logprobs_match_training_forward(model):
    prompts = [[3, 7, 9, 1, 4], [5], [8, 8, 2]]
    g = torch.Generator().manual_seed(1)
    outs = sample(model, prompts, SamplingParams(temperature=0.7, max_tokens=6), generator=g)
    rows = [p + o.tokens for p, o in zip(prompts, outs, strict=True)]
    tokens, doc_lens = pad_rows(rows)
    with torch.no_grad():
        logp = token_logprobs(model, tokens, doc_lens, temperature=0.7)
    for i, (p, o) in enumerate(zip(prompts, outs, strict=True)):
        assert len(o.tokens) == 6 and o.finish_reason == "length"
        want = logp[i, len(p) : len(p) + len(o.tokens)]
        torch.testing.assert_close(torch.tensor(o.logprobs), want, atol=1e-4, rtol=0)


def test_batch_equals_each_prompt_alone(model):
    prompts = [[3, 7, 9, 1, 4, 2, 2], [5], [8, 8, 2]]
    greedy = SamplingParams(temperature=0, max_tokens=5)
    together = sample(model, prompts, greedy)
    for p, t in zip(prompts, together, strict=True):
        alone = sample(model, [p], greedy)[0]
        assert alone.tokens == t.tokens
        torch.testing.assert_close(torch.tensor(alone.logprobs), torch.tensor(t.logprobs), atol=1e-5, rtol=0)


def test_stop_tokens_and_per_prompt_params(model):
    prompts = [[1, 2, 3], [4, 5]]
    g = torch.Generator().manual_seed(0)
    free = sample(model, prompts, SamplingParams(temperature=1.0, max_tokens=12), generator=g)
    stop_tok = free[0].tokens[2]  # a token the first row samples at step 3
    g = torch.Generator().manual_seed(0)
    outs = sample(
        model,
        prompts,
        [SamplingParams(temperature=1.0, max_tokens=12, stop_token_ids=[stop_tok]),
         SamplingParams(temperature=1.0, max_tokens=3)],
        generator=g,
    )
    first = free[0].tokens.index(stop_tok) + 1
    assert outs[0].tokens == free[0].tokens[:first] and outs[0].finish_reason == "stop"
    assert outs[0].tokens[-1] == stop_tok  # the stop token is returned (and trained on)
    assert len(outs[1].tokens) == 3 and outs[1].finish_reason == "length"


def test_top_p_keeps_only_the_nucleus(model):
    # top_p tiny: only the most likely token survives, so sampling equals greedy
    prompts = [[1, 2, 3], [9]]
    g = torch.Generator().manual_seed(3)
    nucleus = sample(model, prompts, SamplingParams(temperature=1.0, top_p=1e-6, max_tokens=4), generator=g)
    greedy = sample(model, prompts, SamplingParams(temperature=0, max_tokens=4))
    assert [o.tokens for o in nucleus] == [o.tokens for o in greedy]
    # only one token left in the nucleus: it was sampled with probability 1
    assert all(lp == 0.0 for o in nucleus for lp in o.sampling_logprobs)
    assert all(lp < 0 for o in nucleus for lp in o.logprobs)  # the tempered distribution's own


def test_sampling_logprobs_renormalise_the_nucleus(model):
    g = torch.Generator().manual_seed(4)
    full = sample(model, [[1, 2]], SamplingParams(temperature=0.8, max_tokens=5), generator=g)[0]
    assert full.sampling_logprobs == pytest.approx(full.logprobs, abs=1e-6)  # top_p = 1: the same
    g = torch.Generator().manual_seed(4)
    nucleus = sample(model, [[1, 2]], SamplingParams(temperature=0.8, top_p=0.5, max_tokens=5), generator=g)[0]
    assert all(s >= lp - 1e-6 for s, lp in zip(nucleus.sampling_logprobs, nucleus.logprobs, strict=True))
    assert any(s > lp + 1e-3 for s, lp in zip(nucleus.sampling_logprobs, nucleus.logprobs, strict=True))


def test_top_p_one_keeps_the_whole_tail():
    # the float32 mass above the last token rounds to 1.0: top_p = 1 must still keep it
    probs = torch.tensor([[0.5, 0.5, 1e-9]])
    assert float((probs[0, :2].cumsum(-1))[-1]) >= 1.0
    assert torch.equal(_filter_top_p(probs, torch.tensor([1.0])), probs)
    assert torch.equal(_filter_top_p(probs, torch.tensor([0.6])), torch.tensor([[0.5, 0.5, 0.0]]))


def test_bad_requests_are_user_errors(model):
    with pytest.raises(UserError, match="empty"):
        sample(model, [[]], SamplingParams())
    with pytest.raises(UserError, match="vocabulary"):
        sample(model, [[VOCAB]], SamplingParams())
    with pytest.raises(UserError, match="top_p"):
        sample(model, [[1]], SamplingParams(top_p=0))
    assert model.training  # restored after the call


def _counting(policy, calls: list[int]):
    """The policy with its decode calls' batch sizes recorded (the real decode runs)."""
    real = policy.decode

    def decode(tokens, cache, **kw):
        calls.append(tokens.shape[0])
        return real(tokens, cache, **kw)

    policy.decode = decode
    return policy


@pytest.mark.parametrize("kind", ["glm", "hf"])
def test_equal_prompts_are_prefilled_once_and_sample_as_if_alone(kind, model, request):
    """A GRPO group: each distinct prompt is prefilled once and its cache rows repeated; every
    completion's logprobs still equal the training forward's, greedy rows equal the prompt alone."""
    from training.policy import as_policy
    from training.policy.hf import HFPolicy

    policy = as_policy(model) if kind == "glm" else HFPolicy.load(request.getfixturevalue("tiny_hf"))
    a, b = [3, 7, 9, 1, 4], [5, 8]
    prompts = [a, a, b, a, b, b, a]
    calls: list[int] = []
    g = torch.Generator().manual_seed(3)
    outs = sample(_counting(policy, calls), prompts, SamplingParams(temperature=0.9, max_tokens=6), generator=g)
    assert calls[0] == 2 and calls[1] == len(prompts)  # one prefill row per distinct prompt, then every row
    assert len({tuple(o.tokens) for o in outs}) > 2  # the rows of a group sampled apart
    rows = [p + o.tokens for p, o in zip(prompts, outs, strict=True)]
    tokens, doc_lens = pad_rows(rows)
    with torch.no_grad():
        logp = token_logprobs(policy, tokens, doc_lens, temperature=0.9)
    for i, (p, o) in enumerate(zip(prompts, outs, strict=True)):
        want = logp[i, len(p) : len(p) + len(o.tokens)]
        torch.testing.assert_close(torch.tensor(o.logprobs), want, atol=1e-4, rtol=0)
    greedy = SamplingParams(temperature=0, max_tokens=5)
    group = sample(policy, [b, a, a, b], greedy)
    for p, t in zip([b, a, a, b], group, strict=True):
        alone = sample(policy, [p], greedy)[0]
        assert alone.tokens == t.tokens
        torch.testing.assert_close(torch.tensor(alone.logprobs), torch.tensor(t.logprobs), atol=1e-5, rtol=0)
