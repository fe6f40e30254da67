"""Rollouts: the agentic mask (observations in context, never trained), token-in/token-out
records equal to a training-path forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.rl.algo.update import batch_tensors, logprobs_of
from training.rl.stages.episodes import rollout
from training.rl.tasks.toy import EOS, OBS, VOCAB, ToyTask, ToyTaskConfig
from training.serving.sampler import SamplingParams


@pytest.fixture(scope="module")
def model() -> GLMModel:
    torch.manual_seed(0)
    return GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))


def test_lookup_episodes_mask_observations(model):
    task = ToyTask("lookup", ToyTaskConfig(kind="lookup"))
    problems = task.problems(16, np.random.default_rng(0))
    params = SamplingParams(temperature=1.0, max_tokens=3, stop_token_ids=[EOS, OBS])
    trajs = rollout(model, task, problems, 4, params, torch.Generator().manual_seed(0))
    assert len(trajs) == 64 and [t.group for t in trajs[:8]] == ["0"] * 4 + ["1"] * 4
    with_obs = [t for t in trajs if len(t.turns) == 2]
    assert with_obs, "some episodes must have called the tool (seeded)"
    for t in trajs:
        p = problems[int(t.group)]
        assert t.prompt_ids == p.prompt and t.tokens == p.prompt + t.output_ids
        generated = [tok for tok, m in zip(t.output_ids, t.loss_mask, strict=True) if m]
        assert generated == [tok for turn in t.turns for tok in turn]  # exactly the sampled tokens
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.loss_mask, strict=True) if not m)
    for t in with_obs:
        first = len(t.turns[0])
        obs = task.observe(problems[int(t.group)], t.turns[0])
        assert t.output_ids[first : first + len(obs)] == obs and t.loss_mask[first : first + len(obs)] == [0] * len(obs)
    # recorded logprobs are the model's own, recomputed on the full sequences
    b = batch_tensors(trajs)
    lp = logprobs_of(model, b, 1.0)
    diff = (lp - b["rollout_logp"]).abs() * b["mask"]
    assert float(diff.max()) < 1e-4
