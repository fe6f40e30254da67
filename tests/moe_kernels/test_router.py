"""Fused router kernel vs the pure-torch reference: ids exactly, gates/scores/counts, dlogits."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from moe_kernels import reference
from tests.moe_kernels.conftest import DEVICE, needs_kernels

pytestmark = needs_kernels

# (tokens, experts, topk, groups or None, score function, scaling factor)
CASES = {
    "random": (37, 12, 4, None, "sigmoid", 2.5),
    "grouped": (29, 24, 8, (8, 4), "sigmoid", 2.5),
    "grouped_softmax": (21, 16, 4, (4, 2), "softmax", None),
    "softmax": (19, 12, 3, None, "softmax", 1.5),
    "single_token": (1, 6, 2, None, "sigmoid", None),
    "top1_unnormalised": (23, 9, 1, None, "sigmoid", 3.0),
    "E_not_pow2_many": (17, 33, 8, None, "sigmoid", 2.5),
}


def _inputs(N, E, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, E, generator=g).to(DEVICE).requires_grad_()
    bias = (torch.randn(E, generator=g) * 0.1).to(DEVICE)
    return logits, bias


def _route_both(logits, bias, k, groups, fn, scale):
    from moe_kernels import router

    ng, gk = groups or (None, None)
    mine = router.route(logits, k, fn, bias, ng, gk, scale)
    ref = reference.route(logits, k, fn, bias, ng, gk, scale)
    return mine, ref


@pytest.mark.parametrize("case", CASES)
def test_router_matches_reference_forward_and_backward(case):
    N, E, k, groups, fn, scale = CASES[case]
    logits, bias = _inputs(N, E)
    (gates, ids, scores, counts), (r_gates, r_ids, r_scores, r_counts) = _route_both(
        logits, bias, k, groups, fn, scale
    )
    assert torch.equal(ids, r_ids)  # same experts, same (descending) order
    assert torch.equal(counts, r_counts) and counts.sum() == N * k
    assert_close(gates, r_gates)
    assert_close(scores, r_scores)
    if groups:  # every token's picks lie in at most group_topk groups
        used = (ids // (E // groups[0])).tolist()
        assert all(len(set(row)) <= groups[1] for row in used)

    g = torch.Generator().manual_seed(1)
    dg = torch.randn(N, k, generator=g).to(DEVICE)
    ds = torch.randn(N, E, generator=g).to(DEVICE)
    (d,) = torch.autograd.grad((gates * dg).sum() + (scores * ds).sum(), logits)
    (r_d,) = torch.autograd.grad((r_gates * dg).sum() + (r_scores * ds).sum(), logits)
    assert_close(d, r_d)
    # gates alone (the layer without an aux loss): the kernel's no-dscores path
    (gates, *_), (r_gates, *_) = _route_both(logits, bias, k, groups, fn, scale)
    (d,) = torch.autograd.grad((gates * dg).sum(), logits)
    (r_d,) = torch.autograd.grad((r_gates * dg).sum(), logits)
    assert_close(d, r_d)


def test_bias_chooses_but_never_weights():
    from moe_kernels import router

    logits = torch.tensor([[0.0, 2.0, 1.0, -1.0]], device=DEVICE)
    gates, ids, _, counts = router.route(
        logits, 1, "sigmoid", torch.tensor([0.0, 0.0, 0.0, 5.0], device=DEVICE)
    )
    assert ids.item() == 3 and counts.tolist() == [0, 0, 0, 1]
    assert_close(gates[0, 0], torch.sigmoid(torch.tensor(-1.0, device=DEVICE)))


def test_all_tokens_to_one_expert():
    from moe_kernels import router

    logits = torch.randn(40, 7, device=DEVICE)
    logits[:, 5] += 20.0
    gates, ids, _, counts = router.route(logits, 1, "sigmoid", None, None, None, None)
    assert (ids == 5).all() and counts.tolist() == [0, 0, 0, 0, 0, 40, 0]
    assert_close(gates, torch.sigmoid(logits[:, 5:6]))


def test_no_tokens():
    from moe_kernels import router

    logits = torch.zeros(0, 8, device=DEVICE, requires_grad=True)
    gates, ids, scores, counts = router.route(logits, 2, "sigmoid", None)
    assert gates.shape == (0, 2) and ids.shape == (0, 2) and counts.tolist() == [0] * 8
    gates.sum().backward()
    assert logits.grad.shape == (0, 8)


def test_reference_router_gradcheck_float64():
    torch.manual_seed(0)
    logits = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(8, dtype=torch.float64) * 0.1
    for fn, groups in (("sigmoid", (4, 2)), ("softmax", (None, None))):

        def f(x, fn=fn, groups=groups):
            gates, _, scores, _ = reference.route(x, 4, fn, bias, *groups, 2.5)
            return gates, scores

        assert torch.autograd.gradcheck(f, (logits,))
