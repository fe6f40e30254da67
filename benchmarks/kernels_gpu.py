"""MoE kernels on a CUDA GPU: correctness at GLM-5 shapes and timings side by side (one call, < 5 min).

Shapes (defaults): GLM-5's expert FFN, hidden 6144, expert FFN 2048, 256 experts, top-8, 16K
tokens, bf16. Sections, each also recorded in the JSON written to OUT:

  router        fused kernel vs ``moe_kernels.reference.route``: ids agreement, gate error, time
  permute       counting-sort permute / gated unpermute vs the reference: exact equality; time
                and effective bandwidth (bytes each must move) vs HBM peak (goal >= 60%)
  grouped_gemm  fc1 (and fc2) shape, forward and forward+backward: ours (best of a small tile
                sweep) vs a loop of ``torch.matmul`` vs ``torch._grouped_mm`` vs one dense GEMM
                of equal FLOPs (goal: ours >= 70% of dense bf16 throughput); dX/dW errors vs the loop
  moe_pipeline  route -> permute -> SwiGLU experts -> unpermute, forward+backward, triton vs torch
                backend steps (``training.model.moe``), output error and time

Without CUDA it writes {"status": "skipped", ...} to OUT and exits 2. ``--smoke`` runs every
section at tiny shapes on CPU under Triton's interpreter (timings meaningless) so the script
itself is tested (tests/moe_kernels/test_gpu_script.py). Run: `make bench-gpu` or
`python benchmarks/kernels_gpu.py out/kernels_gpu.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

# nominal HBM bandwidth (TB/s) by device-name fragment; --hbm-tbps overrides, and the measured
# bandwidth of a large device copy is reported next to it either way
HBM_TBPS = {"H200": 4.8, "H100 SXM": 3.35, "H100 NVL": 3.9, "H100 PCIe": 2.0, "H100": 3.35, "B200": 8.0,
            "A100-SXM4-80GB": 2.04, "A100 80GB PCIe": 1.94, "A100": 1.56, "L40S": 0.864}  # fmt: skip
GEMM_GOAL, BANDWIDTH_GOAL, TOLERANCE = 0.70, 0.60, 2e-2


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="path of the JSON results file")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--ffn", type=int, default=2048, help="expert FFN size")
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10, help="timed repetitions (median reported)")
    ap.add_argument("--hbm-tbps", type=float, help="HBM peak in TB/s (default: from the device name)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes; on CPU via Triton's interpreter")
    a = ap.parse_args(argv)
    if a.smoke:
        a.tokens, a.hidden, a.ffn, a.experts, a.topk, a.iters = 48, 64, 32, 8, 2, 1
    return a


def timed(fn, iters: int, cuda: bool) -> float:
    """Median seconds per call; on the GPU after one warm-up call (compiles, allocator)."""
    if cuda:
        fn()
    times = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|: one number per tensor, robust to bf16's relative rounding."""
    if b.numel() == 0:
        return 0.0
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


class Bench:
    def __init__(self, a: argparse.Namespace, device: torch.device):
        self.a, self.dev, self.cuda = a, device, device.type == "cuda"
        self.dtype = torch.bfloat16 if self.cuda else torch.float32  # bf16 CPU matmuls are slow
        g = torch.Generator(device=device).manual_seed(0)
        T, h, f, E = a.tokens, a.hidden, a.ffn, a.experts
        self.logits = torch.randn(T, E, device=device, generator=g)
        self.bias = torch.randn(E, device=device, generator=g) * 0.01
        self.x = torch.randn(T, h, device=device, generator=g, dtype=self.dtype)
        self.w1 = torch.randn(E, 2 * f, h, device=device, generator=g, dtype=self.dtype) * h**-0.5
        self.w2 = torch.randn(E, h, f, device=device, generator=g, dtype=self.dtype) * f**-0.5
        self.errors: list[str] = []

    def time(self, fn) -> float:
        return timed(fn, self.a.iters, self.cuda)

    def check(self, name: str, ok: bool) -> bool:
        if not ok:
            self.errors.append(name)
        return ok

    # -- sections -------------------------------------------------------------------------
    def router(self) -> dict:
        from moe_kernels import reference, router

        a = self.a
        args = (self.logits, a.topk, "sigmoid", self.bias, None, None, 2.5)
        gates, ids, _, counts = router.route(*args)
        r_gates, r_ids, _, r_counts = reference.route(*args)
        same = (ids == r_ids).all(1)
        agree = float(same.float().mean())
        return {
            "ids_agreement": agree,  # < 1 only through fp32 near-ties between sigmoid implementations
            "ok": self.check("router", agree > 0.999 and rel_err(gates[same], r_gates[same]) < 1e-5),
            "gates_rel_err": rel_err(gates[same], r_gates[same]),
            "counts_equal": bool(torch.equal(counts, r_counts)),
            "ms_triton": 1e3 * self.time(lambda: router.route(*args)),
            "ms_reference": 1e3 * self.time(lambda: reference.route(*args)),
        }

    def permute(self, peak_tbps: float | None, copy_tbps: float) -> dict:
        from moe_kernels import permute, reference

        a, x = self.a, self.x
        _, ids, _, _ = reference.route(self.logits, a.topk, "sigmoid", self.bias)
        gates = torch.rand(ids.shape, device=self.dev)
        xp, order, counts = permute.permute(x, ids, a.experts)
        r_xp, r_order, r_counts = reference.permute(x, ids, a.experts)
        exact = torch.equal(xp, r_xp) and torch.equal(order, r_order) and torch.equal(counts, r_counts)
        out, r_out = permute.unpermute(xp, order, gates), reference.unpermute(r_xp, r_order, gates)
        round_trip = torch.zeros_like(gates)
        round_trip[:, 0] = 1.0
        identity = torch.equal(permute.unpermute(xp, order, round_trip), x)
        t_p = self.time(lambda: permute.permute(x, ids, a.experts))
        t_u = self.time(lambda: permute.unpermute(xp, order, gates))
        # bytes that must move: permute reads and writes every routed row; unpermute reads the
        # routed rows and writes one row per token (index and gate traffic is < 1% and ignored)
        row = x.shape[1] * x.element_size()
        p_tbps = 2 * xp.shape[0] * row / t_p / 1e12
        u_tbps = (xp.shape[0] + x.shape[0]) * row / t_u / 1e12
        peak = peak_tbps or copy_tbps
        return {
            "ok": self.check("permute", exact and identity and rel_err(out, r_out) < TOLERANCE),
            "exact_vs_reference": exact,
            "round_trip_identity": identity,
            "unpermute_rel_err": rel_err(out, r_out),
            "ms_permute": 1e3 * t_p,
            "ms_permute_reference": 1e3 * self.time(lambda: reference.permute(x, ids, a.experts)),
            "ms_unpermute": 1e3 * t_u,
            "ms_unpermute_reference": 1e3 * self.time(lambda: reference.unpermute(r_xp, r_order, gates)),
            "permute_tbps": p_tbps,
            "unpermute_tbps": u_tbps,
            "fraction_of_peak": min(p_tbps, u_tbps) / peak,
            "peak_tbps_used": peak,
        }

    def grouped_gemm(self, which: str) -> dict:
        from moe_kernels import reference
        from moe_kernels.grouped_gemm import GPU_TILES, INTERPRETER_TILES, TileConfig, grouped_gemm

        a = self.a
        _, ids, _, _ = reference.route(self.logits, a.topk, "sigmoid", self.bias)
        counts = torch.bincount(ids.reshape(-1), minlength=a.experts)
        M = int(counts.sum())
        weight = self.w1 if which == "fc1" else self.w2
        w = weight.transpose(1, 2)  # [E, K, N] view of Megatron's [out, in]
        K, N = w.shape[1], w.shape[2]
        g = torch.Generator(device=self.dev).manual_seed(1)
        x = torch.randn(M, K, device=self.dev, generator=g, dtype=self.dtype)
        dy = torch.randn(M, N, device=self.dev, generator=g, dtype=self.dtype)
        flops = 2 * M * K * N
        res: dict = {"M": M, "K": K, "N": N}

        # correctness vs the loop of matmuls (fp32 accumulation in cuBLAS too); autograd.grad
        # and detached views: no weight copies, no .grad accumulation (12.9 GB for fc1)
        xg, wg = x.detach().requires_grad_(), weight.detach().requires_grad_()
        y = grouped_gemm(xg, wg.transpose(1, 2), counts)
        dx, dw = torch.autograd.grad(y, (xg, wg), dy)
        ref = reference.grouped_gemm(xg, wg.transpose(1, 2), counts)
        r_dx, r_dw = torch.autograd.grad(ref, (xg, wg), dy)
        errs = {"y": rel_err(y, ref), "dx": rel_err(dx, r_dx), "dw": rel_err(dw, r_dw)}
        res["rel_err"] = errs
        res["ok"] = self.check(f"grouped_gemm_{which}", max(errs.values()) < TOLERANCE)
        del y, ref, dx, dw, r_dx, r_dw

        configs = [INTERPRETER_TILES] if not self.cuda else [
            GPU_TILES,
            TileConfig(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3),
            TileConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4),
            TileConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4),
            TileConfig(block_m=128, block_n=128, block_k=32, num_warps=4, num_stages=5),
        ]  # fmt: skip
        sweep = {}
        for cfg in configs:
            name = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}w{cfg.num_warps}s{cfg.num_stages}"
            try:
                sweep[name] = self.time(lambda cfg=cfg: grouped_gemm(x, w, counts, cfg))
            except Exception as e:  # a config that does not fit this GPU's shared memory
                sweep[name] = repr(e)[:200]
        timings = {n: t for n, t in sweep.items() if isinstance(t, float)}
        best = min(timings, key=timings.get)
        best_cfg = configs[list(sweep).index(best)]
        res["tile_sweep_ms"] = {n: (1e3 * t if isinstance(t, float) else t) for n, t in sweep.items()}
        res["best_tiles"] = best

        fwd = {"triton": lambda: grouped_gemm(x, w, counts, best_cfg)}
        fwd["loop_matmul"] = lambda: reference.grouped_gemm(x, w, counts)
        if reference.grouped_mm_available(x, w):
            fwd["torch_grouped_mm"] = lambda: reference.grouped_gemm_torch(x, w, counts)
        dense_w = torch.randn(K, N, device=self.dev, generator=g, dtype=self.dtype)
        fwd["dense_equal_flops"] = lambda: x @ dense_w
        res["forward"] = self._race(fwd, flops)

        xb, wb, dwb = x.detach().requires_grad_(), w.detach().requires_grad_(), dense_w.requires_grad_()
        grads = {
            "triton": lambda: torch.autograd.grad(grouped_gemm(xb, wb, counts, best_cfg), (xb, wb), dy),
            "loop_matmul": lambda: torch.autograd.grad(reference.grouped_gemm(xb, wb, counts), (xb, wb), dy),
            "dense_equal_flops": lambda: torch.autograd.grad(xb @ dwb, (xb, dwb), dy),
        }
        if "torch_grouped_mm" in fwd:
            grads["torch_grouped_mm"] = lambda: torch.autograd.grad(
                reference.grouped_gemm_torch(xb, wb, counts), (xb, wb), dy
            )
        res["forward_backward"] = self._race(grads, 3 * flops)
        ratio = res["forward"]["triton"]["tflops"] / res["forward"]["dense_equal_flops"]["tflops"]
        res["fraction_of_dense"] = ratio
        return res

    def _race(self, fns: dict, flops: int) -> dict:
        out = {}
        for name, fn in fns.items():
            try:
                t = self.time(fn)
                out[name] = {"ms": 1e3 * t, "tflops": flops / t / 1e12}
            except Exception as e:  # e.g. torch._grouped_mm without a kernel for this GPU
                out[name] = {"error": repr(e)[:300]}
        return out

    def moe_pipeline(self) -> dict:
        from moe_kernels.moe_backend import steps
        from training.model import moe

        a = self.a
        backends = {"triton": steps(), "torch": (moe.route, moe.permute, moe.grouped_experts, moe.unpermute)}
        dy = torch.randn_like(self.x)

        def run(be):
            route, permute, experts, unpermute = be
            leaves = [t.detach().requires_grad_() for t in (self.logits, self.x, self.w1, self.w2)]
            logits, x, w1, w2 = leaves
            probs, ids, _ = route(logits, a.topk, "sigmoid", self.bias, None, None, 2.5)
            xp, order, counts = permute(x, ids, a.experts)
            out = unpermute(experts(xp, counts, w1, w2), order, probs)
            return out.detach(), torch.autograd.grad(out, leaves, dy)

        (out, grads), (r_out, r_grads) = run(backends["triton"]), run(backends["torch"])
        errs = {"out": rel_err(out, r_out)}
        errs |= {
            f"d{n}": rel_err(g, r)
            for n, g, r in zip(("logits", "x", "w1", "w2"), grads, r_grads, strict=True)
        }
        del grads, r_grads
        res = {"rel_err": errs, "ok": self.check("moe_pipeline", max(errs.values()) < TOLERANCE)}
        for name, be in backends.items():
            res[f"ms_fwd_bwd_{name}"] = 1e3 * self.time(lambda be=be: run(be))
        res["speedup_triton_vs_torch"] = res["ms_fwd_bwd_torch"] / res["ms_fwd_bwd_triton"]
        return res


def copy_bandwidth(device: torch.device, cuda: bool) -> float:
    """TB/s of a large device-to-device copy (read + write): a practical HBM ceiling."""
    n = (1 << 30) if cuda else (1 << 22)
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * n / timed(lambda: dst.copy_(src), 10, cuda) / 1e12


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    if not cuda and not a.smoke:
        msg = "no CUDA device: this benchmark needs an NVIDIA GPU (use --smoke for a CPU interpreter run)"
        out.write_text(json.dumps({"status": "skipped", "reason": msg}, indent=1))
        print(f"kernels_gpu: skipped, {msg}; wrote {out}", file=sys.stderr)
        return 2
    if not cuda:  # must precede the first triton import (see moe_kernels/runtime.py)
        os.environ["TRITON_INTERPRET"] = "1"
    import triton

    device = torch.device("cuda" if cuda else "cpu")
    name = torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or 'interpreter'})"
    peak = a.hbm_tbps or next((v for k, v in HBM_TBPS.items() if k in name), None)
    result: dict = {
        "status": "ok",
        "device": name,
        "smoke": a.smoke,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "shapes": {k: getattr(a, k) for k in ("tokens", "hidden", "ffn", "experts", "topk")},
        "hbm_peak_tbps_nominal": peak,
    }
    t0 = time.perf_counter()
    b = Bench(a, device)
    result["copy_tbps_measured"] = copy_bandwidth(device, cuda)
    sections = {
        "router": b.router,
        "permute": lambda: b.permute(peak, result["copy_tbps_measured"]),
        "grouped_gemm_fc1": lambda: b.grouped_gemm("fc1"),
        "grouped_gemm_fc2": lambda: b.grouped_gemm("fc2"),
        "moe_pipeline": b.moe_pipeline,
    }
    for key, fn in sections.items():
        t1 = time.perf_counter()
        try:
            result[key] = fn()
        except Exception:
            result[key] = {"error": traceback.format_exc()[-2000:]}
            b.errors.append(key)
        result[key]["seconds"] = time.perf_counter() - t1
        if cuda:
            torch.cuda.empty_cache()
        print(f"{key}: {json.dumps(result[key], default=str)[:400]}", flush=True)
    gemm = result.get("grouped_gemm_fc1", {}).get("fraction_of_dense")
    bw = result.get("permute", {}).get("fraction_of_peak")
    result["goals"] = {
        "grouped_gemm_fraction_of_dense": {"value": gemm, "goal": GEMM_GOAL, "met": gemm is not None and gemm >= GEMM_GOAL},
        "permute_fraction_of_hbm_peak": {"value": bw, "goal": BANDWIDTH_GOAL, "met": bw is not None and bw >= BANDWIDTH_GOAL},
    }  # fmt: skip
    result["failed"] = b.errors
    result["seconds"] = time.perf_counter() - t0
    out.write_text(json.dumps(result, indent=1, default=str))
    print(f"goals: {json.dumps(result['goals'])}\nfailed checks: {b.errors or 'none'}; wrote {out}")
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
