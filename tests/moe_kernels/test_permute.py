"""Counting-sort permute / gated unpermute kernels vs the pure-torch reference."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from moe_kernels import reference
from tests.moe_kernels.conftest import DEVICE, needs_kernels

pytestmark = needs_kernels


def _ids(kind: str, g: torch.Generator) -> tuple[torch.Tensor, int]:
    """Expert ids [N, k] and E for each shape class the issue names."""
    if kind == "random":  # E not a power of two, more picks than one block of the sort
        return torch.randint(0, 13, (150, 4), generator=g), 13
    if kind == "empty_experts":  # experts 0, 2, 5, 7, 8 get nothing
        return torch.tensor([1, 3, 4, 6])[torch.randint(0, 4, (31, 2), generator=g)], 9
    if kind == "single_token":
        return torch.tensor([[4, 1, 2]]), 5
    if kind == "one_expert":  # every pick goes to expert 2
        return torch.full((27, 2), 2), 6
    if kind == "many_experts":  # E = 40: wider than the 32-wide blocks, and not a power of two
        return torch.randint(0, 40, (45, 8), generator=g), 40
    raise AssertionError(kind)


KINDS = ["random", "empty_experts", "single_token", "one_expert", "many_experts"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_permute_unpermute_match_reference(kind, dtype):
    from moe_kernels import permute

    g = torch.Generator().manual_seed(0)
    ids, E = _ids(kind, g)
    N, k = ids.shape
    h = 40  # not a multiple of the column block
    ids = ids.to(DEVICE)
    x = torch.randn(N, h, generator=g).to(DEVICE, dtype).requires_grad_()
    gates = torch.rand(N, k, generator=g).to(DEVICE).requires_grad_()

    xp, order, counts = permute.permute(x, ids, E)
    r_xp, r_order, r_counts = reference.permute(x, ids, E)
    assert torch.equal(order, r_order) and torch.equal(counts, r_counts)
    assert torch.equal(xp, r_xp)  # a permutation copies bits

    y = torch.randn(N * k, h, generator=g).to(DEVICE, dtype).requires_grad_()
    out = permute.unpermute(y, order, gates)
    r_out = reference.unpermute(y, r_order, gates)
    # bf16: the kernel sums the k products in fp32 and rounds once, the reference rounds each
    tol = {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    assert out.dtype == dtype
    assert_close(out, r_out, **tol)

    d_xp = torch.randn(N * k, h, generator=g).to(DEVICE, dtype)
    d_out = torch.randn(N, h, generator=g).to(DEVICE, dtype)
    grads = torch.autograd.grad((xp * d_xp).sum() + (out * d_out).sum(), (x, y, gates))
    r_grads = torch.autograd.grad((r_xp * d_xp).sum() + (r_out * d_out).sum(), (x, y, gates))
    for a, b in zip(grads, r_grads, strict=True):
        assert a.dtype == b.dtype
        assert_close(a, b, **tol)


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_is_exactly_the_identity(kind):
    from moe_kernels import permute

    g = torch.Generator().manual_seed(1)
    ids, E = _ids(kind, g)
    N, k = ids.shape
    ids = ids.to(DEVICE)
    x = torch.randn(N, 24, generator=g).to(DEVICE)
    xp, order, _ = permute.permute(x, ids, E)
    # one pick of weight 1, the rest 0: the unpermuted row is that pick's copy, bit for bit
    one_hot = torch.zeros(N, k, device=DEVICE)
    one_hot[torch.arange(N), torch.randint(0, k, (N,), generator=g)] = 1.0
    assert torch.equal(permute.unpermute(xp, order, one_hot), x)
    if k <= 2:  # 1/k weights summed are exact in binary floating point for k = 1, 2
        assert torch.equal(permute.unpermute(xp, order, torch.full((N, k), 1.0 / k, device=DEVICE)), x)


def test_expert_rows_are_contiguous_and_token_ordered():
    from moe_kernels import permute

    ids = torch.tensor([[2, 0], [0, 1], [2, 1], [0, 2]], device=DEVICE)
    x = torch.arange(4.0, device=DEVICE)[:, None].repeat(1, 3)
    xp, order, counts = permute.permute(x, ids, 4)
    assert counts.tolist() == [3, 2, 3, 0]
    # expert 0: tokens 0, 1, 3; expert 1: tokens 1, 2; expert 2: tokens 0, 2, 3; expert 3: none
    assert xp[:, 0].tolist() == [0, 1, 3, 1, 2, 0, 2, 3]
    assert order.tolist() == [1, 2, 6, 3, 5, 0, 4, 7]  # flat pick index = token * k + j


def test_no_tokens():
    from moe_kernels import permute

    x = torch.zeros(0, 8, device=DEVICE, requires_grad=True)
    ids = torch.zeros(0, 2, dtype=torch.int64, device=DEVICE)
    xp, order, counts = permute.permute(x, ids, 5)
    assert xp.shape == (0, 8) and order.numel() == 0 and counts.tolist() == [0] * 5
    out = permute.unpermute(xp, order, torch.zeros(0, 2, device=DEVICE))
    out.sum().backward()
    assert out.shape == (0, 8) and x.grad.shape == (0, 8)


def test_reference_gradcheck_float64():
    torch.manual_seed(0)
    ids = torch.randint(0, 5, (7, 3))
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: reference.permute(x, ids, 5)[0], (x,))
    _, order, _ = reference.permute(x, ids, 5)
    y = torch.randn(21, 4, dtype=torch.float64, requires_grad=True)
    gates = torch.rand(7, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda y, g: reference.unpermute(y, order, g), (y, gates))
