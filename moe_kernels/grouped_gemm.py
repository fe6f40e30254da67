"""Grouped GEMM: ``X_e @ W_e`` for every expert in one launch, rows per expert variable.

Rows are expert-major (``moe_kernels.permute``'s layout): expert e owns rows
``offs[e]:offs[e+1]``. The forward grid covers an upper bound on the number of row tiles,
``cdiv(M, BM) + E``, so no host synchronisation is needed to size it; each program finds its
expert by counting how many experts' tile ranges end at or before its tile id (a vector
compare over E, cheaper than a sync), and programs past the last tile do nothing.

Backward: ``dX = dY @ W_e^T`` is the same kernel with W's strides swapped (no copy);
``dW_e = X_e^T @ dY_e`` is a second kernel whose reduction runs over the expert's rows, one
program per (output tile, expert). Every operand is passed with its strides, so transposed
views such as ``w1.transpose(1, 2)`` (Megatron's [out, in] weights) are used in place and dW
is written directly in the weight's own layout. Accumulation is fp32 (``tl.dot``); fp32
inputs use IEEE products so the CPU interpreter tests can compare tightly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from pydantic import BaseModel, ConfigDict, Field

from moe_kernels.runtime import check_device, interpreting


class TileConfig(BaseModel):
    """Output tile ``block_m x block_n``, reduction step ``block_k`` (both kernels)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    block_m: int = Field(default=128, ge=16)
    block_n: int = Field(default=128, ge=16)
    block_k: int = Field(default=64, ge=16)
    group_m: int = Field(default=8, gt=0)  # row tiles per L2 group (forward / dX)
    num_warps: int = Field(default=8, gt=0)
    num_stages: int = Field(default=3, gt=0)


# Hopper-class bf16 default; the interpreter runs one numpy call per program, so there the
# largest tile that still exercises masking at test shapes is fastest.
GPU_TILES = TileConfig()
INTERPRETER_TILES = TileConfig(block_m=32, block_n=32, block_k=32, group_m=2, num_warps=4, num_stages=1)


@triton.jit
def _grouped_mm(
    x_ptr, w_ptr, y_ptr, offs_ptr, tiles_ptr, N, K, num_pid_m,
    sxm, sxk, swe, swk, swn, sym, syn,
    E: tl.constexpr, BLOCK_E: tl.constexpr, GROUP_M: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    # GROUP_M row tiles sweep all column tiles before the next group starts, so the few
    # experts' weights and rows they touch stay in L2 (row-major order re-reads X per column)
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    experts = tl.arange(0, BLOCK_E)
    tile_end = tl.load(tiles_ptr + 1 + experts, mask=experts < E, other=2**30)
    e = tl.sum((tile_end <= pid_m).to(tl.int32), axis=0)
    if e < E:  # the grid is an upper bound: programs past the last tile do nothing
        row_end = tl.load(offs_ptr + e + 1)
        rows = tl.load(offs_ptr + e) + (pid_m - tl.load(tiles_ptr + e)) * BM + tl.arange(0, BM)
        cols = pid_n * BN + tl.arange(0, BN)
        row_ok = rows < row_end
        col_ok = cols < N
        x_rows = x_ptr + rows.to(tl.int64)[:, None] * sxm
        w_cols = w_ptr + e.to(tl.int64) * swe + cols[None, :] * swn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ks = k0 + tl.arange(0, BK)
            k_ok = ks < K
            a = tl.load(x_rows + ks[None, :] * sxk, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(w_cols + ks[:, None] * swk, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            if UPCAST:
                a, b = a.to(tl.float32), b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        out = y_ptr + rows.to(tl.int64)[:, None] * sym + cols[None, :] * syn
        tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _grouped_mm_dw(
    x_ptr, dy_ptr, dw_ptr, offs_ptr, K, N,
    sxm, sxk, sym, syn, swe, swk, swn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """dW_e[k, n] = sum over the expert's rows r of X[r, k] * dY[r, n]; an empty expert gets 0."""
    pid = tl.program_id(0)
    e = tl.program_id(1)
    n_tiles = tl.cdiv(N, BN)
    ks = (pid // n_tiles) * BM + tl.arange(0, BM)
    ns = (pid % n_tiles) * BN + tl.arange(0, BN)
    k_ok = ks < K
    n_ok = ns < N
    start = tl.load(offs_ptr + e)
    end = tl.load(offs_ptr + e + 1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for r0 in range(start, end, BK):
        rs = r0 + tl.arange(0, BK)
        r_ok = rs < end
        a = tl.load(x_ptr + rs.to(tl.int64)[None, :] * sxm + ks[:, None] * sxk,
                    mask=k_ok[:, None] & r_ok[None, :], other=0.0)  # fmt: skip
        b = tl.load(dy_ptr + rs.to(tl.int64)[:, None] * sym + ns[None, :] * syn,
                    mask=r_ok[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    out = dw_ptr + e.to(tl.int64) * swe + ks[:, None] * swk + ns[None, :] * swn
    tl.store(out, acc.to(dw_ptr.dtype.element_ty), mask=k_ok[:, None] & n_ok[None, :])


def _dot_mode(dtype: torch.dtype) -> dict:
    """fp32 operands: IEEE products (tests compare tightly); bf16/fp16: the tensor-core path.
    Triton 3.9's interpreter multiplies bf16 *bit patterns* as integers in ``tl.dot``, so
    there bf16 tiles are upcast to fp32 first (same math: fp32 accumulation of exact products)."""
    upcast = dtype == torch.bfloat16 and interpreting()
    return {"PRECISION": "ieee" if dtype == torch.float32 or upcast else "tf32", "UPCAST": upcast}


def _tiles(config: TileConfig | None) -> TileConfig:
    return config or (INTERPRETER_TILES if interpreting() else GPU_TILES)


def _offsets(tokens_per_expert: torch.Tensor, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row offsets [E+1] and cumulative row-tile counts [E+1], both on the device (no sync)."""
    counts = tokens_per_expert.to(torch.int64)
    zero = counts.new_zeros(1)
    offs = torch.cat([zero, torch.cumsum(counts, 0)])
    tiles = torch.cat([zero, torch.cumsum((counts + block_m - 1) // block_m, 0)])
    return offs, tiles


def _forward(x, w, offs, tiles, cfg: TileConfig) -> torch.Tensor:
    M, K = x.shape
    E, _, N = w.shape
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    if M and N:
        num_pid_m = triton.cdiv(M, cfg.block_m) + E  # >= the real row-tile count, without a sync
        _grouped_mm[(num_pid_m * triton.cdiv(N, cfg.block_n),)](
            x, w, y, offs, tiles, N, K, num_pid_m,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2), y.stride(0), y.stride(1),
            E=E, BLOCK_E=triton.next_power_of_2(E), GROUP_M=cfg.group_m,
            BM=cfg.block_m, BN=cfg.block_n, BK=cfg.block_k,
            **_dot_mode(x.dtype), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip
    return y


def _weight_grad(x, dy, w, offs, cfg: TileConfig) -> torch.Tensor:
    E, K, N = w.shape
    dw = torch.empty_like(w)  # same strides as w: the grad of a transposed view lands contiguous
    if dw.numel():
        grid = (triton.cdiv(K, cfg.block_m) * triton.cdiv(N, cfg.block_n), E)
        _grouped_mm_dw[grid](
            x, dy, dw, offs, K, N,
            x.stride(0), x.stride(1), dy.stride(0), dy.stride(1), dw.stride(0), dw.stride(1), dw.stride(2),
            BM=cfg.block_m, BN=cfg.block_n, BK=cfg.block_k, **_dot_mode(x.dtype),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip
    return dw


class _GroupedGemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, tokens_per_expert, cfg):
        offs, tiles = _offsets(tokens_per_expert, cfg.block_m)
        ctx.save_for_backward(x, w, offs, tiles)
        ctx.cfg = cfg
        return _forward(x, w, offs, tiles, cfg)

    @staticmethod
    def backward(ctx, dy):
        x, w, offs, tiles = ctx.saved_tensors
        dx = _forward(dy, w.transpose(1, 2), offs, tiles, ctx.cfg) if ctx.needs_input_grad[0] else None
        dw = _weight_grad(x, dy, w, offs, ctx.cfg) if ctx.needs_input_grad[1] else None
        return dx, dw, None, None


def grouped_gemm(
    x: torch.Tensor, w: torch.Tensor, tokens_per_expert: torch.Tensor, config: TileConfig | None = None
) -> torch.Tensor:
    """Triton ``moe_kernels.reference.grouped_gemm``: x [M,K] expert-major rows, w [E,K,N] (any
    strides, e.g. a transposed view), tokens_per_expert [E] summing to M -> y [M,N]."""
    check_device(x)
    if w.dtype != x.dtype:
        raise TypeError(f"grouped_gemm: x is {x.dtype} but w is {w.dtype}; cast w first")
    return _GroupedGemm.apply(x, w, tokens_per_expert, _tiles(config))


def expert_ffn(
    x: torch.Tensor,
    tokens_per_expert: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """Triton ``moe_kernels.reference.expert_ffn``: SwiGLU experts as two grouped GEMMs (fc1 rows
    [gate; up], Megatron's [out, in] weights used through transposed views, no copies)."""
    w1, w2 = w1.to(x.dtype), w2.to(x.dtype)  # autocast does not reach a custom kernel
    gate, up = grouped_gemm(x, w1.transpose(1, 2), tokens_per_expert, config).chunk(2, dim=-1)
    return grouped_gemm(F.silu(gate) * up, w2.transpose(1, 2), tokens_per_expert, config)
