"""Newton–Schulz cost: MuonSplit's per-head orthogonalization vs one fused matrix (goal: per-head <= 1/3 FLOPs).

FLOPs are counted for GLM-5's real up-projections (W_UQ: 64 heads x 256 rows x q_lora 2048;
W_UK/W_UV: 64 heads x (192 + 256) rows x kv_lora 512). Time is measured on the same head
structure with every dimension divided by ``--shrink`` (full size takes minutes on a CPU).
Baseline: plain Muon, one Newton–Schulz on each whole matrix.
Writes out/bench/newton_schulz.json. Run: `python benchmarks/newton_schulz.py [--shrink 2] [--repeat 3]`.
"""

from __future__ import annotations

import argparse
import time

import torch
from _report import Result, write

from training.optim.muon import newton_schulz, ns_flops, orthogonal_update


def shapes(shrink: int) -> dict[str, tuple[int, list[int], int]]:
    H, q_lora, kv_lora, qk, rope, v = 64, 2048, 512, 192, 64, 256
    s = shrink
    return {
        "linear_q_up_proj": (H // s, [(qk + rope) // s], q_lora // s),
        "linear_kv_up_proj": (H // s, [qk // s, v // s], kv_lora // s),
    }


def timed(fn, repeat: int) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shrink", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(0)
    f_fused = f_split = t_fused = t_split = 0.0
    print("GLM-5 up-projections, Newton-Schulz FLOPs (5 steps):")
    for name, (H, rows, cols) in shapes(1).items():
        fused = ns_flops(H * sum(rows), cols)
        split = H * sum(ns_flops(r, cols) for r in rows)
        f_fused, f_split = f_fused + fused, f_split + split
        print(f"  {name:18s} fused {fused / 1e9:8.1f} GFLOP   per-head {split / 1e9:8.1f} GFLOP")
    print(f"per-head / fused FLOPs: {f_split / f_fused:.3f}  (goal <= 0.333)")
    for H, rows, cols in shapes(args.shrink).values():
        g = torch.randn(H * sum(rows), cols)
        t_fused += timed(lambda g=g: newton_schulz(g), args.repeat)
        t_split += timed(
            lambda g=g, H=H, rows=rows: orthogonal_update(
                g, (H, rows), 5, (3.4445, -4.7750, 2.0315), 0.2, torch.float32
            ),
            args.repeat,
        )
    print(
        f"time at 1/{args.shrink} size: fused (baseline) {t_fused * 1e3:.1f} ms, per-head {t_split * 1e3:.1f} ms"
    )
    print(f"ratio fused/per-head time: {t_fused / t_split:.2f}")
    write(
        __file__,
        Result("muonsplit newton-schulz flops", f_split / 1e9, f_fused / 1e9, "GFLOP", goal=3.0,
               higher_is_better=False, ours_label="MuonSplit: per-head Newton-Schulz (GLM-5 shapes)",
               baseline_label="Muon: one Newton-Schulz per whole up-projection"),
        {"shapes": "GLM-5 W_UQ, W_UK/W_UV", "steps": 5, "time_shrink": args.shrink, "repeat": args.repeat},
        [Result(f"muonsplit newton-schulz time 1/{args.shrink}", t_split * 1e3, t_fused * 1e3, "ms",
                higher_is_better=False, ours_label="per-head", baseline_label="fused")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
