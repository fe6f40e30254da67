"""Group-wise policy optimisation: hand-computed advantages, clipping, token-level averaging,
truncated importance sampling, KL, and the distillation advantage."""

from __future__ import annotations

import math

import pytest
import torch

from training.rl.algo.losses import PolicyLossConfig, group_advantages, policy_loss, token_logprobs


def test_group_advantages_normalise_within_each_group():
    adv = group_advantages(torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 0, 3, 1, 2, 2]), 4)
    # group 1: mean .5, std .5 -> +-1; group 2: all equal -> 0; group 3: mean 2, std sqrt(.5)
    s = math.sqrt(0.5)
    torch.testing.assert_close(adv, torch.tensor([1.0, -1, -1, 1, 0, 0, 0, 0, 1 / s, -1 / s, 0, 0]), atol=1e-5, rtol=0)
    centred = group_advantages(torch.tensor([1.0, 0, 0, 1]), 4, std_normalize=False)
    torch.testing.assert_close(centred, torch.tensor([0.5, -0.5, -0.5, 0.5]))
    with pytest.raises(ValueError):
        group_advantages(torch.ones(5), 4)
    with pytest.raises(ValueError):
        group_advantages(torch.ones(4), 0)
    with pytest.raises(ValueError, match="non-finite rewards at \\[2\\]"):
        group_advantages(torch.tensor([1.0, 0.0, float("nan"), 1.0]), 2)


def test_all_equal_rewards_give_zero_advantage_and_a_zero_finite_loss():
    for rewards in ([1.0] * 4, [0.0] * 4, [1e6] * 4):
        adv = group_advantages(torch.tensor(rewards), 4)
        assert torch.equal(adv, torch.zeros(4))
    logp = torch.randn(4, 3, requires_grad=True)
    out = policy_loss(logp, logp.detach() + 0.1, adv, torch.ones(4, 3), PolicyLossConfig())
    out.loss.backward()
    assert float(out.loss.detach()) == 0.0 and torch.equal(logp.grad, torch.zeros(4, 3))


def _loss(ratio: float, adv: float, **cfg):
    logp = torch.tensor([[0.0, math.log(ratio)]], requires_grad=True)
    out = policy_loss(logp, torch.zeros(1, 2), torch.tensor([adv]), torch.tensor([[0.0, 1.0]]),
                      PolicyLossConfig(tis_cap=None, **cfg))  # fmt: skip
    out.loss.backward()
    return float(out.loss.detach()), float(logp.grad[0, 1])


@pytest.mark.parametrize(
    ("ratio", "adv", "want", "has_grad"),
    [
        (1.5, 1.0, -1.28, False),  # above 1 + 0.28 with A > 0: clipped, no gradient
        (1.2, 1.0, -1.2, True),  # inside the asymmetric upper bound (0.28 > 0.2)
        (1.5, -1.0, 1.5, True),  # A < 0: the unclipped (pessimistic) term
        (0.5, 1.0, -0.5, True),
        (0.5, -1.0, 0.8, False),  # below 1 - 0.2 with A < 0: clipped
    ],
)
def test_asymmetric_clip(ratio, adv, want, has_grad):
    loss, grad = _loss(ratio, adv)
    assert loss == pytest.approx(want, abs=1e-6)
    assert (grad != 0) == has_grad


def test_loss_is_a_token_level_mean_over_masked_tokens():
    # row 0 has 3 trained tokens, row 1 one; the masked prompt/pad positions never count
    logp = torch.zeros(2, 5)
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 0, 1, 0]], dtype=torch.float32)
    adv = torch.tensor([1.0, -2.0])
    out = policy_loss(logp, logp, adv, mask, PolicyLossConfig())
    # per token -A: row 0 -> -1 x 3, row 1 -> +2 x 1; token mean = (-3 + 2) / 4 (a sample mean would give 0.5)
    assert float(out.loss) == pytest.approx(-0.25)
    assert out.stats["tokens"] == 4


def test_truncated_importance_sampling_weights():
    logp = torch.zeros(1, 3)
    rollout = torch.tensor([[0.0, math.log(0.25), math.log(2.0)]])  # trainer/rollout = 4 and 0.5
    mask = torch.tensor([[0.0, 1, 1]])
    out = policy_loss(logp, logp, torch.tensor([1.0]), mask, PolicyLossConfig(tis_cap=2.0), logp_rollout=rollout)
    # weights min(4, 2) = 2 and 0.5; per token -A * w
    assert float(out.loss) == pytest.approx(-(2.0 + 0.5) / 2)
    assert out.stats["tis_weight_mean"] == pytest.approx(1.25)


def test_kl_to_reference():
    logp = torch.tensor([[0.0, -1.0]], requires_grad=True)
    mask = torch.tensor([[0.0, 1.0]])
    cfg = PolicyLossConfig(kl_coef=0.5, tis_cap=None)
    same = policy_loss(logp, logp.detach(), torch.zeros(1), mask, cfg, logp_ref=logp.detach())
    assert float(same.loss.detach()) == pytest.approx(0.0) and same.stats["kl"] == pytest.approx(0.0)
    ref = torch.tensor([[0.0, -2.0]])
    out = policy_loss(logp, logp.detach(), torch.zeros(1), mask, cfg, logp_ref=ref)
    d = -1.0  # ref - logp
    assert float(out.loss.detach()) == pytest.approx(0.5 * (math.exp(d) - d - 1))
    with pytest.raises(ValueError, match="reference"):
        policy_loss(logp, logp.detach(), torch.zeros(1), mask, cfg)


def test_per_token_advantages_for_distillation():
    # teacher above the student on token 1, below on token 2: push up, push down
    logp = torch.zeros(1, 3, requires_grad=True)
    adv = torch.tensor([[0.0, 0.7, -0.3]])
    out = policy_loss(logp, logp.detach(), adv, torch.tensor([[0.0, 1, 1]]), PolicyLossConfig(tis_cap=None))
    out.loss.backward()
    assert logp.grad[0, 1] < 0 < logp.grad[0, 2]  # descent raises token 1, lowers token 2
    assert logp.grad[0, 0] == 0


def test_masked_token_logprobs_run_the_head_only_on_the_loss_mask(tiny_hf):
    """With the loss mask, an HF policy's head sees only the masked tokens' positions; their logprobs
    (and gradients) are the full forward's, every other position is 0."""
    from training.policy import load_policy
    from training.policy.hf import head_split

    policy = load_policy(tiny_hf)
    assert head_split(policy.module) is not None  # checked once per model, before the hook
    tokens = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 0, 0]])
    doc_lens = [torch.tensor([6]), torch.tensor([4])]
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]], dtype=torch.float32)
    seen = []
    hook = policy.module.get_output_embeddings().register_forward_hook(lambda m, i, o: seen.append(o.shape[:-1]))
    part = token_logprobs(policy, tokens, doc_lens, 0.7, mask)
    hook.remove()
    assert seen == [torch.Size([5])]  # 3 + 2 masked tokens, not 2 rows x 6 positions
    full = token_logprobs(policy, tokens, doc_lens, 0.7)
    assert torch.allclose(part * mask, full * mask, atol=1e-5) and bool((part[mask == 0] == 0).all())
    w = policy.module.model.layers[0].mlp.up_proj.weight
    g = torch.autograd.grad((part * mask).sum(), w)[0]
    g_full = torch.autograd.grad((token_logprobs(policy, tokens, doc_lens, 0.7) * mask).sum(), w)[0]
    assert torch.allclose(g, g_full, atol=1e-5)
