"""Grouped GEMM kernel (forward, dX, dW) and the SwiGLU expert FFN vs the pure-torch loop."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from moe_kernels import reference
from tests.moe_kernels.conftest import DEVICE, needs_kernels
from training.model.moe import loop_experts

pytestmark = needs_kernels

# rows per expert; the interpreter's tiles are 32x32x32 (group of 2 row tiles)
COUNTS = {
    "empty_experts": [7, 0, 3, 45, 1, 0],
    "single_row": [0, 1, 0],
    "one_expert": [0, 0, 70, 0],
    "nine_experts": [5, 33, 0, 2, 64, 1, 0, 9, 31],  # E not a power of two, tiles straddling experts
    "no_rows": [0, 0, 0],
}


def _problem(counts, K, N, dtype, transposed, seed=0):
    g = torch.Generator().manual_seed(seed)
    counts = torch.tensor(counts)
    M, E = int(counts.sum()), len(counts)
    x = torch.randn(M, K, generator=g).to(DEVICE, dtype).requires_grad_()
    if transposed:  # Megatron's [out, in] weights used as [E, K, N] through a view, as the FFN does
        base = torch.randn(E, N, K, generator=g).to(DEVICE, dtype).requires_grad_()
        w = base.transpose(1, 2)
    else:
        base = w = torch.randn(E, K, N, generator=g).to(DEVICE, dtype).requires_grad_()
    return x, base, w, counts.to(DEVICE), torch.randn(M, N, generator=g).to(DEVICE, dtype)


@pytest.mark.parametrize("case", COUNTS)
@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_gemm_matches_loop_fp32(case, transposed):
    from moe_kernels.grouped_gemm import grouped_gemm

    x, base, w, counts, dy = _problem(COUNTS[case], K=40, N=24, dtype=torch.float32, transposed=transposed)
    y = grouped_gemm(x, w, counts)
    ref = reference.grouped_gemm(x, w, counts)
    assert_close(y, ref)
    dx, dw = torch.autograd.grad(y, (x, base), dy)
    r_dx, r_dw = torch.autograd.grad(ref, (x, base), dy)
    assert_close(dx, r_dx)
    assert_close(dw, r_dw)
    if transposed:  # dW was written in the weight's own layout, no copy back
        assert dw.is_contiguous()
    empty = torch.tensor(COUNTS[case]) == 0
    assert (dw[empty.to(DEVICE)] == 0).all()  # an empty expert's weight gets an exact zero gradient


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_grouped_gemm_half_precision_accumulates_in_fp32(dtype):
    from moe_kernels.grouped_gemm import grouped_gemm

    x, base, w, counts, dy = _problem(COUNTS["nine_experts"], K=96, N=48, dtype=dtype, transposed=True)
    y = grouped_gemm(x, w, counts)
    assert y.dtype == dtype
    # compare with an fp32 reference: a kernel that accumulated in half precision would be off
    # by far more than one final rounding over K = 96 terms
    ref = reference.grouped_gemm(x.float(), w.float(), counts)
    assert_close(y.float(), ref, atol=0.05, rtol=1e-2)
    dx, dw = torch.autograd.grad(y, (x, base), dy)
    r_dx, r_dw = torch.autograd.grad(ref, (x, base), dy.float())
    assert_close(dx.float(), r_dx.float(), atol=0.05, rtol=1e-2)
    assert_close(dw.float(), r_dw.float(), atol=0.05, rtol=1e-2)


@pytest.mark.parametrize("case", ["empty_experts", "nine_experts"])
def test_expert_ffn_matches_reference_and_training_loop(case):
    from moe_kernels.grouped_gemm import expert_ffn

    g = torch.Generator().manual_seed(0)
    counts = torch.tensor(COUNTS[case], device=DEVICE)
    M, E, h, f = int(counts.sum()), len(counts), 40, 24
    x = torch.randn(M, h, generator=g).to(DEVICE).requires_grad_()
    w1 = (torch.randn(E, 2 * f, h, generator=g) * 0.3).to(DEVICE).requires_grad_()
    w2 = (torch.randn(E, h, f, generator=g) * 0.3).to(DEVICE).requires_grad_()
    dy = torch.randn(M, h, generator=g).to(DEVICE)
    out = expert_ffn(x, counts, w1, w2)
    for ref_fn in (reference.expert_ffn, loop_experts):
        ref = ref_fn(x, counts, w1, w2)
        assert_close(out, ref)
        for a, b in zip(
            torch.autograd.grad(out, (x, w1, w2), dy, retain_graph=True),
            torch.autograd.grad(ref, (x, w1, w2), dy),
            strict=True,
        ):
            assert_close(a, b, atol=1e-4, rtol=1e-4)  # fp32 sums over up to 64 rows, other order


def test_grouped_gemm_rejects_mixed_dtypes():
    from moe_kernels.grouped_gemm import grouped_gemm

    x = torch.randn(4, 16, device=DEVICE, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="cast w"):
        grouped_gemm(x, torch.randn(2, 16, 16, device=DEVICE), torch.tensor([1, 3], device=DEVICE))


def test_reference_gradcheck_float64():
    torch.manual_seed(0)
    counts = torch.tensor([3, 0, 2, 1])
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: reference.grouped_gemm(x, w, counts), (x, w))
    w1 = torch.randn(4, 6, 5, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(4, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, a, b: reference.expert_ffn(x, counts, a, b), (x, w1, w2))
