"""Dropless permute / unpermute: tokens sorted by expert into one padding-free buffer, and back.

The sort is a counting sort, which is exact and stable (token order is kept inside an
expert, like ``torch.argsort(stable=True)``), so ``order`` equals the reference bit for bit:

1. ``_histogram``: each block of picks counts its picks per expert (a one-hot column sum);
2. an exclusive scan over [blocks, E] (tiny, in torch) gives every block its first row per
   expert: the expert's offset plus the picks of that expert in earlier blocks;
3. ``_place``: within the block, an exclusive cumsum of the one-hot gives each pick its
   rank among same-expert picks, so its row is ``base[block, e] + rank``.

The data movement (``_gather_rows``, ``_combine_rows``, ``_combine_bwd``) is then one row
copy or one k-way weighted sum per row, reading and writing each byte once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_kernels.runtime import check_device, interpreting


@triton.jit
def _histogram(ids_ptr, hist_ptr, T, E: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_T: tl.constexpr):
    b = tl.program_id(0)
    i = b * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    ids = tl.load(ids_ptr + i, mask=i < T, other=BLOCK_E)  # padding matches no expert
    onehot = (ids[:, None] == cols[None, :]).to(tl.int32)
    tl.store(hist_ptr + b * E + cols, tl.sum(onehot, axis=0), mask=cols < E)


@triton.jit
def _place(
    ids_ptr, base_ptr, order_ptr, dest_ptr, T,
    E: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    i = b * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = i < T
    cols = tl.arange(0, BLOCK_E)
    ids = tl.load(ids_ptr + i, mask=ok, other=BLOCK_E)
    onehot = (ids[:, None] == cols[None, :]).to(tl.int32)
    rank = tl.sum((tl.cumsum(onehot, axis=0) - onehot) * onehot, axis=1)
    dest = tl.load(base_ptr + b * E + ids, mask=ok, other=0) + rank
    tl.store(dest_ptr + i, dest, mask=ok)
    tl.store(order_ptr + dest, i.to(tl.int64), mask=ok)


@triton.jit
def _invert(order_ptr, back_ptr, T, BLOCK_T: tl.constexpr):
    p = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = p < T
    tl.store(back_ptr + tl.load(order_ptr + p, mask=ok, other=0), p.to(tl.int64), mask=ok)


@triton.jit
def _gather_rows(
    src_ptr, idx_ptr, dst_ptr, R, H, div,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    """dst[r] = src[idx[r] // div]: permute (idx = order, div = k)."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ok = (r < R)[:, None] & (h < H)[None, :]
    src_row = tl.load(idx_ptr + r, mask=r < R, other=0) // div
    v = tl.load(src_ptr + src_row[:, None] * H + h[None, :], mask=ok)
    tl.store(dst_ptr + r.to(tl.int64)[:, None] * H + h[None, :], v, mask=ok)


@triton.jit
def _combine_rows(
    y_ptr, back_ptr, gates_ptr, out_ptr, N, H,
    K: tl.constexpr, HAS_GATES: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    """out[t] = sum_j gates[t, j] * y[back[t*k + j]] in fp32, j in a fixed order (deterministic)."""
    t = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    t_ok = t < N
    ok = t_ok[:, None] & (h < H)[None, :]
    acc = tl.zeros((BLOCK_R, BLOCK_H), dtype=tl.float32)
    for j in tl.static_range(K):
        row = tl.load(back_ptr + t * K + j, mask=t_ok, other=0)
        v = tl.load(y_ptr + row[:, None] * H + h[None, :], mask=ok, other=0.0).to(tl.float32)
        if HAS_GATES:
            v = v * tl.load(gates_ptr + t * K + j, mask=t_ok, other=0.0).to(tl.float32)[:, None]
        acc += v
    tl.store(out_ptr + t.to(tl.int64)[:, None] * H + h[None, :], acc, mask=ok)


@triton.jit
def _combine_bwd(
    dout_ptr, y_ptr, order_ptr, gates_ptr, dy_ptr, dgates_ptr, R, H,
    K: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    """For permuted row p holding pick i = order[p] of token t = i // k:
    dy[p] = gates[i] * dout[t]   and   dgates[i] = <dout[t], y[p]>."""
    p = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    p_ok = p < R
    i = tl.load(order_ptr + p, mask=p_ok, other=0)
    t = i // K
    g = tl.load(gates_ptr + i, mask=p_ok, other=0.0).to(tl.float32)
    dot = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        ok = p_ok[:, None] & (h < H)[None, :]
        d = tl.load(dout_ptr + t[:, None] * H + h[None, :], mask=ok, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + p.to(tl.int64)[:, None] * H + h[None, :], mask=ok, other=0.0).to(tl.float32)
        dot += tl.sum(d * y, axis=1)
        tl.store(dy_ptr + p.to(tl.int64)[:, None] * H + h[None, :], d * g[:, None], mask=ok)
    tl.store(dgates_ptr + i, dot, mask=p_ok)


def _blocks(H: int) -> tuple[int, int]:
    """(rows, columns) per program for the row kernels. Under the interpreter each program
    is a numpy call, so fewer, larger programs are much faster."""
    if interpreting():
        return 16, min(triton.next_power_of_2(max(H, 1)), 256)
    bh = min(triton.next_power_of_2(max(H, 1)), 1024)
    return max(1, 4096 // bh), bh


def _sort_picks(ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """order (row -> pick), dest (pick -> row), tokens_per_expert: the counting sort above."""
    flat = ids.reshape(-1).contiguous()
    T, dev = flat.numel(), flat.device
    be = triton.next_power_of_2(num_experts)
    bt = max(16, min(256, 8192 // be))  # one-hot block [bt, be] of ~8K entries
    nb = triton.cdiv(T, bt)
    hist = torch.zeros(nb, num_experts, device=dev, dtype=torch.int32)
    order = torch.empty(T, device=dev, dtype=torch.int64)
    dest = torch.empty(T, device=dev, dtype=torch.int64)
    if T:
        _histogram[(nb,)](flat, hist, T, E=num_experts, BLOCK_E=be, BLOCK_T=bt)
    counts = hist.sum(0, dtype=torch.int64)
    within = torch.cumsum(hist, 0, dtype=torch.int64) - hist  # picks of e in earlier blocks
    base = (torch.cumsum(counts, 0) - counts)[None, :] + within
    if T:
        _place[(nb,)](flat, base, order, dest, T, E=num_experts, BLOCK_E=be, BLOCK_T=bt)
    return order, dest, counts


def _combine(y: torch.Tensor, back: torch.Tensor, gates: torch.Tensor | None, N: int, k: int) -> torch.Tensor:
    H = y.shape[1]
    out = torch.empty(N, H, device=y.device, dtype=y.dtype)
    br, bh = _blocks(H)
    if N and H:
        _combine_rows[(triton.cdiv(N, br), triton.cdiv(H, bh))](
            y, back, gates if gates is not None else y, out, N, H,
            K=k, HAS_GATES=gates is not None, BLOCK_R=br, BLOCK_H=bh,
        )  # fmt: skip
    return out


class _Permute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, num_experts):
        x = x.contiguous()
        order, dest, counts = _sort_picks(ids, num_experts)
        T, H = order.numel(), x.shape[1]
        x_perm = torch.empty(T, H, device=x.device, dtype=x.dtype)
        br, bh = _blocks(H)
        if T and H:
            _gather_rows[(triton.cdiv(T, br), triton.cdiv(H, bh))](
                x, order, x_perm, T, H, ids.shape[1], BLOCK_R=br, BLOCK_H=bh
            )
        ctx.save_for_backward(dest)
        ctx.shape = (x.shape[0], ids.shape[1])
        ctx.mark_non_differentiable(order, counts)
        return x_perm, order, counts

    @staticmethod
    def backward(ctx, dx_perm, _dorder, _dcounts):
        (dest,) = ctx.saved_tensors
        N, k = ctx.shape
        return _combine(dx_perm.contiguous(), dest, None, N, k), None, None


class _Unpermute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, order, gates):
        y, order, gates = y.contiguous(), order.contiguous(), gates.contiguous()
        N, k = gates.shape
        T = order.numel()
        back = torch.empty_like(order)
        if T:
            _invert[(triton.cdiv(T, 1024),)](order, back, T, BLOCK_T=1024)
        ctx.save_for_backward(y, order, gates)
        return _combine(y, back, gates, N, k)

    @staticmethod
    def backward(ctx, dout):
        y, order, gates = ctx.saved_tensors
        R, H = y.shape
        dy = torch.empty_like(y)
        dgates = torch.empty_like(gates)
        br, bh = _blocks(H)
        if R:
            _combine_bwd[(triton.cdiv(R, br),)](
                dout.contiguous(), y, order, gates, dy, dgates, R, H,
                K=gates.shape[1], BLOCK_R=br, BLOCK_H=bh,
            )  # fmt: skip
        return dy, None, dgates


def permute(
    x: torch.Tensor, ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton ``moe_kernels.reference.permute``: x_perm [N*k, h] expert-major, order [N*k], tokens_per_expert [E]."""
    check_device(x)
    return _Permute.apply(x, ids, num_experts)


def unpermute(y: torch.Tensor, order: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """Triton ``moe_kernels.reference.unpermute``: out [N, h] = sum_j gates[t, j] * (row of pick (t, j))."""
    check_device(y)
    return _Unpermute.apply(y, order, gates)
