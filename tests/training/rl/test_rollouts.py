"""Rollouts: the agentic mask (observations in context, never trained), token-in/token-out
records equal to a training-path forward, toy rewards, and one policy
update that moves the policy the way its advantages say."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.optim.optimizers import OptimizerConfig, build_optimizer
from training.rl.losses import token_logprobs
from training.rl.rollouts import rollout
from training.rl.toy_tasks import CALL, DIGIT0, EOS, OBS, SEP, VOCAB, ToyTask, ToyTaskConfig
from training.rl.update import UpdateConfig, batch_tensors, logprobs_of, policy_update, rl_advantages
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


def test_lookup_reward_and_reference():
    task = ToyTask("lookup", ToyTaskConfig(kind="lookup", seed=5))
    (p,) = task.problems(1, np.random.default_rng(1))
    call = [CALL, DIGIT0 + p.key, OBS]
    assert task.observe(p, call) == [p.answer[0], SEP]
    assert task.observe(p, [CALL, DIGIT0 + (p.key + 1) % 10, OBS]) == [SEP]  # wrong key: empty observation
    assert task.reward(p, [call, [p.answer[0], EOS]]) == 1.0
    assert task.reward(p, [call, [DIGIT0 + (int(p.answer[0] - DIGIT0) + 1) % 10, EOS]]) == 0.0
    tokens, mask = task.reference(p)
    assert tokens[len(p.prompt) :] == call + [p.answer[0], SEP, p.answer[0], EOS]
    assert mask[len(p.prompt) :] == [1, 1, 1, 0, 0, 1, 1]


def test_shift_and_sort_rewards_give_partial_credit():
    sort = ToyTask("s", ToyTaskConfig(kind="sort", digits=3))
    (p,) = sort.problems(1, np.random.default_rng(3))
    assert sort.reward(p, [p.answer + [EOS]]) == 1.0
    assert sort.reward(p, [p.answer[:2]]) == pytest.approx(2 / 3)
    shift = ToyTask("m", ToyTaskConfig(kind="shift", digits=2, offset=-1))
    (q,) = shift.problems(1, np.random.default_rng(4))
    digits = [t - DIGIT0 for t in q.prompt[1:-1]]
    assert q.answer == [DIGIT0 + (d - 1) % 10 for d in digits]


def test_policy_update_raises_advantaged_tokens():
    torch.manual_seed(1)
    m = GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))
    task = ToyTask("plus", ToyTaskConfig(kind="shift", digits=1))
    problems = task.problems(8, np.random.default_rng(2))
    params = SamplingParams(temperature=1.0, max_tokens=2, stop_token_ids=[EOS])
    trajs = rollout(m, task, problems, 4, params, torch.Generator().manual_seed(2))
    for i, t in enumerate(trajs):  # a synthetic reward: favour every other sample in each group
        t.reward = float(i % 2)
    cfg = UpdateConfig(loss={"tis_cap": None})
    adv = rl_advantages(trajs, 4, cfg.loss)
    b = batch_tensors(trajs)
    before = token_logprobs(m, b["tokens"], b["doc_lens"]).detach()
    opt = build_optimizer(m, OptimizerConfig(name="adamw", lr=1e-2, weight_decay=0.0))
    stats = policy_update(m, opt, trajs, adv, cfg)
    after = token_logprobs(m, b["tokens"], b["doc_lens"]).detach()
    delta = ((after - before) * b["mask"]).sum(1)
    assert stats["tokens"] == float(b["mask"].sum())
    assert delta[adv > 0].mean() > 0 > delta[adv < 0].mean()


def test_kl_to_a_reference_model_in_the_update(model):
    task = ToyTask("plus", ToyTaskConfig(kind="shift", digits=1))
    trajs = rollout(model, task, task.problems(4, np.random.default_rng(5)), 2,
                    SamplingParams(temperature=1.0, max_tokens=2, stop_token_ids=[EOS]), torch.Generator().manual_seed(5))  # fmt: skip
    torch.manual_seed(0)
    m = GLMModel(model.cfg)
    m.load_state_dict(model.state_dict())
    opt = build_optimizer(m, OptimizerConfig(name="adamw", lr=1e-3))
    cfg = UpdateConfig(loss={"kl_coef": 0.1})
    stats = policy_update(m, opt, trajs, rl_advantages(trajs, 2, cfg.loss), cfg, ref_model=model)
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)  # measured before the step: policy == reference
    stats = policy_update(m, opt, trajs, rl_advantages(trajs, 2, cfg.loss), cfg, ref_model=model)
    assert stats["kl"] > 0  # the first step moved the policy away from the reference


def test_distillation_update_moves_the_student_toward_its_teacher():
    """policy_update with teacher logprobs: the advantage is sg[log pi_T - log pi_old], so tokens
    the teacher likes more rise and tokens it likes less fall (a flipped sign fails this)."""
    torch.manual_seed(3)
    m = GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))
    task = ToyTask("plus", ToyTaskConfig(kind="shift", digits=1))
    trajs = rollout(m, task, task.problems(8, np.random.default_rng(6)), 1,
                    SamplingParams(temperature=1.0, max_tokens=2, stop_token_ids=[EOS]), torch.Generator().manual_seed(6))  # fmt: skip
    b = batch_tensors(trajs)
    before = logprobs_of(m, b, 1.0)
    sign = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(trajs))])
    teacher = before + sign[:, None] * b["mask"]  # teacher 1 nat above (even rows) / below (odd rows)
    opt = build_optimizer(m, OptimizerConfig(name="adamw", lr=1e-2, weight_decay=0.0))
    stats = policy_update(m, opt, trajs, None, UpdateConfig(loss={"tis_cap": None}), teacher_logp=teacher)
    want = float((sign[:, None] * b["mask"]).sum() / b["mask"].sum())  # the logged mean advantage
    assert stats["teacher_minus_student"] == pytest.approx(want, abs=1e-5)
    delta = ((logprobs_of(m, b, 1.0) - before) * b["mask"]).sum(1)
    assert delta[sign > 0].mean() > 0 > delta[sign < 0].mean()
