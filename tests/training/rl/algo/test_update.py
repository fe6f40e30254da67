"""One policy update: it moves the policy the way its advantages say, measures the KL to a
reference, and in distillation moves the student toward its teacher."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.optim.optimizers import OptimizerConfig, build_optimizer
from training.rl.algo.losses import token_logprobs
from training.rl.algo.update import UpdateConfig, batch_tensors, logprobs_of, policy_update, rl_advantages
from training.rl.stages.episodes import rollout
from training.rl.tasks.toy import EOS, VOCAB, ToyTask, ToyTaskConfig
from training.serving.sampler import SamplingParams


@pytest.fixture(scope="module")
def model() -> GLMModel:
    torch.manual_seed(0)
    return GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))


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


def test_one_pass_update_reuses_its_own_forward_as_the_old_policy():
    """epochs == minibatches == 1: log pi_old comes from the update's own forward (one forward, not
    two), and the step is exactly the one computed with a separate no-grad forward first."""
    from training.rl.algo.losses import policy_loss

    torch.manual_seed(4)
    a = GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))
    b_model = GLMModel(a.cfg)
    b_model.load_state_dict(a.state_dict())
    task = ToyTask("plus", ToyTaskConfig(kind="shift", digits=1))
    trajs = rollout(a, task, task.problems(6, np.random.default_rng(7)), 2,
                    SamplingParams(temperature=1.0, max_tokens=2, stop_token_ids=[EOS]), torch.Generator().manual_seed(7))  # fmt: skip
    for i, t in enumerate(trajs):
        t.reward = float(i % 2)
    cfg = UpdateConfig()
    adv = rl_advantages(trajs, 2, cfg.loss)
    calls = []
    a.register_forward_hook(lambda *_: calls.append(1))
    opt_a = build_optimizer(a, OptimizerConfig(name="adamw", lr=1e-2, weight_decay=0.0))
    policy_update(a, opt_a, trajs, adv, cfg)
    assert len(calls) == 1
    # the same step by hand, the old policy's logprobs from their own no-grad forward
    bt = batch_tensors(trajs)
    old = logprobs_of(b_model, bt, cfg.temperature)
    opt_b = build_optimizer(b_model, OptimizerConfig(name="adamw", lr=1e-2, weight_decay=0.0))
    b_model.train()
    logp = token_logprobs(b_model, bt["tokens"], bt["doc_lens"], cfg.temperature)
    out = policy_loss(logp, old, adv, bt["mask"], cfg.loss, logp_rollout=bt["rollout_logp"])
    opt_b.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(b_model.parameters(), cfg.grad_clip)
    opt_b.step()
    for (name, pa), pb in zip(a.named_parameters(), b_model.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-6), name


@pytest.mark.parametrize("minibatches", [1, 2])
def test_micro_batches_accumulate_to_the_same_step(minibatches):
    """``micro_batch``: each minibatch's forward/backward a few samples at a time, gradients
    accumulated: the same step and the same logged statistics as the minibatch at once (what bounds
    the trainer's memory on long agentic episodes), however the loss tokens fall across samples."""
    torch.manual_seed(5)
    a = GLMModel(tiny_model(vocab_size=len(VOCAB), mtp_num_layers=None, num_layers=2))
    task = ToyTask("plus", ToyTaskConfig(kind="shift", digits=2))
    trajs = rollout(a, task, task.problems(4, np.random.default_rng(8)), 2,
                    SamplingParams(temperature=1.0, max_tokens=4, stop_token_ids=[EOS]), torch.Generator().manual_seed(8))  # fmt: skip
    for i, t in enumerate(trajs):
        t.reward = float(i % 2)
    assert len({len(t.tokens) for t in trajs}) > 1  # samples of different lengths: unequal token shares
    models, stats = [], []
    for micro in (None, 1, 3):
        m = GLMModel(a.cfg)
        m.load_state_dict(a.state_dict())
        cfg = UpdateConfig(minibatches=minibatches, micro_batch=micro, loss={"tis_cap": None})
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        stats.append(policy_update(m, opt, trajs, rl_advantages(trajs, 2, cfg.loss), cfg))
        models.append(m)
    for m, st in zip(models[1:], stats[1:], strict=True):
        assert st["tokens"] == stats[0]["tokens"] and st["loss"] == pytest.approx(stats[0]["loss"], abs=1e-6)
        for (n, p), q in zip(m.named_parameters(), models[0].parameters(), strict=True):
            assert torch.allclose(p, q, atol=1e-6), n
    moved = max(float((p - q).detach().abs().max()) for p, q in zip(models[0].parameters(), a.parameters(), strict=True))
    assert moved > 1e-4  # the step did something
