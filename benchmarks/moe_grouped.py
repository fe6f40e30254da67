"""MoE experts: two grouped GEMMs (``F.grouped_mm``) vs a loop of per-expert matmuls (goal >= 1.3x).

Same routed tokens, same weights, forward + backward, E=64 experts, top-8. Baseline: the loop
reference (``training.moe.loop_experts``). Run: `python benchmarks/moe_grouped.py`.
"""

from __future__ import annotations

import argparse
import time

import torch

from training.moe import grouped_experts, loop_experts, permute, route


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    E, h, f = args.experts, args.hidden, args.ffn
    x = torch.randn(args.tokens, h)
    _, idx, _ = route(torch.randn(args.tokens, E), args.topk)
    xp, _, counts = permute(x, idx, E)
    xp.requires_grad_()
    w1 = (torch.randn(E, 2 * f, h) * 0.05).requires_grad_()
    w2 = (torch.randn(E, h, f) * 0.05).requires_grad_()
    g = torch.randn(xp.shape[0], h)

    def run(fn) -> float:
        fn(xp, counts, w1, w2).backward(g)  # warm-up
        t0 = time.perf_counter()
        for _ in range(args.repeat):
            fn(xp, counts, w1, w2).backward(g)
        return (time.perf_counter() - t0) / args.repeat

    t_loop, t_grouped = run(loop_experts), run(grouped_experts)
    rows = xp.shape[0]
    print(f"E={E} top-{args.topk}: {rows} routed rows, hidden {h}, expert ffn {f}, forward+backward")
    print(f"  loop of per-expert matmuls (baseline): {t_loop * 1e3:8.1f} ms")
    print(f"  grouped_mm:                            {t_grouped * 1e3:8.1f} ms")
    print(f"ratio loop/grouped: {t_loop / t_grouped:.2f}  (goal >= 1.3)")


if __name__ == "__main__":
    main()
