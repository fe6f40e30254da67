"""Muon (+ MuonSplit) for matrices and AdamW for the rest, as one ``torch.optim.Optimizer``.

Muon: Nesterov momentum (0.95) on the gradient, then the update is orthogonalized with 5 steps
of the Newton–Schulz quintic X <- aX + (bA + cA^2)X, A = XX^T, (a, b, c) = (3.4445, -4.7750,
2.0315), which pushes every singular value of the normalized update toward 1 (into roughly
[0.7, 1.2]). The orthogonal update of an A x B matrix has RMS ~ 1/sqrt(max(A, B)), so it is
scaled by 0.2 * sqrt(max(A, B)) to match AdamW's typical update RMS (Moonlight), which lets
both share one learning rate. Weight decay is decoupled: p <- p * (1 - lr * wd) - lr * update.

Blocks: a 3-D parameter (stacked experts [E, out, in]) is E separate matrices. A parameter
with a ``blocks`` spec ``(heads, [rows, ...])`` is MuonSplit's case: its rows are split per
head and, inside a head, into the listed row blocks (W_UK then W_UV for ``linear_kv_up_proj``),
and every block is orthogonalized (and scaled) on its own instead of the whole matrix at once.
Equal-shaped blocks go through Newton–Schulz as one batch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch.distributed.tensor import DTensor, distribute_tensor

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(
    G: torch.Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    eps: float = 1e-7,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Approximately orthogonalize the last two dims of ``G`` (batched over leading dims)."""
    a, b, c = coefficients
    X = G.to(dtype)
    transposed = X.shape[-2] > X.shape[-1]  # iterate on the small Gram matrix
    if transposed:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + eps)
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * (A @ A)) @ X
    if transposed:
        X = X.mT
    return X.to(G.dtype)


def ns_flops(rows: int, cols: int, steps: int = 5) -> int:
    """Matmul FLOPs of ``newton_schulz`` on one rows x cols matrix."""
    m, n = min(rows, cols), max(rows, cols)
    return steps * (2 * m * m * n + 2 * m * m * m + 2 * m * m * n)  # XX^T, A^2, (..)X


def orthogonal_update(
    u: torch.Tensor,
    blocks: tuple[int, list[int]] | None,
    steps: int,
    coefficients: tuple[float, float, float],
    rms_scale: float,
    dtype: torch.dtype,
) -> torch.Tensor:
    """The scaled Newton–Schulz update of one parameter's momentum-corrected gradient ``u``."""

    def ns(x: torch.Tensor) -> torch.Tensor:
        scale = rms_scale * math.sqrt(max(x.shape[-2], x.shape[-1]))
        return newton_schulz(x, steps, coefficients, dtype=dtype) * scale

    if blocks is None:
        return ns(u)  # 2-D matrix, or [E, out, in] experts batched
    heads, rows = blocks
    per_head = u.view(heads, sum(rows), u.shape[-1])
    return torch.cat([ns(part) for part in per_head.split(rows, dim=1)], dim=1).view_as(u)


class Muon(torch.optim.Optimizer):
    """Groups with ``use_muon=True`` get Muon (optional per-parameter ``blocks`` list, aligned
    with ``params``); the others get AdamW. Hyperparameters are per group."""

    def __init__(
        self,
        param_groups: Iterable[dict[str, Any]],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        rms_scale: float = 0.2,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        ns_dtype: torch.dtype = torch.float32,
    ):
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_steps=ns_steps,
            ns_coefficients=tuple(ns_coefficients),
            rms_scale=rms_scale,
            betas=tuple(betas),
            eps=eps,
            use_muon=False,
            blocks=None,
        )
        super().__init__(list(param_groups), defaults)
        self.ns_dtype = ns_dtype
        for g in self.param_groups:
            if g["use_muon"]:
                if g["blocks"] is None:
                    g["blocks"] = [None] * len(g["params"])
                if len(g["blocks"]) != len(g["params"]):
                    raise ValueError("a Muon group's 'blocks' must have one entry per parameter")
                for p, spec in zip(g["params"], g["blocks"], strict=True):
                    if p.ndim not in (2, 3) or (spec is not None and p.ndim != 2):
                        raise ValueError(
                            f"Muon takes 2-D matrices (or 3-D expert stacks), got {tuple(p.shape)}"
                        )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            if g["use_muon"]:
                self._muon(g)
            else:
                self._adamw(g)
        return loss

    def _muon(self, g: dict[str, Any]) -> None:
        lr, wd, mu = g["lr"], g["weight_decay"], g["momentum"]
        for p, spec in zip(g["params"], g["blocks"], strict=True):
            if p.grad is None:
                continue
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            buf = state["momentum_buffer"]
            buf.mul_(mu).add_(p.grad)
            u = p.grad.add(buf, alpha=mu) if g["nesterov"] else buf
            spec = None if spec is None else (int(spec[0]), [int(r) for r in spec[1]])
            args = (spec, g["ns_steps"], g["ns_coefficients"], g["rms_scale"], self.ns_dtype)
            if isinstance(u, DTensor):
                # FSDP shard: orthogonalize the whole matrix (all-gathered; every rank computes
                # the same update), then keep this rank's slice of it
                full = orthogonal_update(u.full_tensor(), *args)
                update = distribute_tensor(full, u.device_mesh, u.placements, src_data_rank=None)
            else:
                update = orthogonal_update(u, *args)
            p.mul_(1 - lr * wd).add_(update.to(p.dtype), alpha=-lr)

    @torch.no_grad()
    def init_state(self) -> None:
        """Create every parameter's state now (zeros, step 0), exactly what the first step would
        create lazily, so a sharded checkpoint has tensors to load into."""
        for g in self.param_groups:
            for p in g["params"]:
                state = self.state[p]
                if g["use_muon"]:
                    state.setdefault("momentum_buffer", torch.zeros_like(p))
                elif "step" not in state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)

    def _adamw(self, g: dict[str, Any]) -> None:
        lr, wd, (b1, b2), eps = g["lr"], g["weight_decay"], g["betas"], g["eps"]
        for p in g["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "step" not in state:
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            t = float(state["step"])
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.lerp_(p.grad, 1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            denom = (v / (1 - b2**t)).sqrt_().add_(eps)
            p.mul_(1 - lr * wd).addcdiv_(m, denom, value=-lr / (1 - b1**t))
