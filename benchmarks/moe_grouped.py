"""MoE experts: two grouped GEMMs (``F.grouped_mm``) vs a loop of per-expert matmuls (goal >= 1.3x).

Same routed tokens, same weights, forward + backward, E=64 experts, top-8. Baseline: the fair
per-expert loop, ``moe_kernels.reference.expert_ffn`` (matmuls over ``w.unbind(0)``: one stack of the
weight gradients in backward). ``training.model.moe.loop_experts`` (``w[e]`` indexing, which pays one
full-size zero gradient per expert in backward) is shown as a second row, not the headline.
Writes out/bench/moe_grouped.json. Run: `python benchmarks/moe_grouped.py`.
"""

from __future__ import annotations

import argparse
import time

import torch
from _report import Result, write

from moe_kernels.reference import expert_ffn
from training.model.moe import grouped_experts, loop_experts, permute, route


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    # 1 by default: on a shared machine an oversubscribed second thread makes timings erratic
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (both sides)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
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
        best = float("inf")  # best of --repeat: the machine is shared, the minimum is the signal
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn(xp, counts, w1, w2).backward(g)
            best = min(best, time.perf_counter() - t0)
        return best

    # interleaved rounds, so a burst of load from elsewhere hits every variant alike
    t_unbind = t_grouped = t_loop = float("inf")
    for _ in range(2):
        t_unbind = min(t_unbind, run(expert_ffn))
        t_grouped = min(t_grouped, run(grouped_experts))
        t_loop = min(t_loop, run(loop_experts))
    rows = xp.shape[0]
    print(f"E={E} top-{args.topk}: {rows} routed rows, hidden {h}, expert ffn {f}, forward+backward, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    print(f"  per-expert loop over w.unbind(0) (baseline): {t_unbind * 1e3:8.1f} ms")
    print(f"  per-expert loop over w[e]:                   {t_loop * 1e3:8.1f} ms")
    print(f"  grouped_mm:                                  {t_grouped * 1e3:8.1f} ms")
    ms = lambda t: t * 1e3  # noqa: E731
    write(
        __file__,
        Result("moe experts grouped_mm", ms(t_grouped), ms(t_unbind), "ms", goal=1.3, higher_is_better=False,
               ours_label="training.model.moe.grouped_experts (F.grouped_mm)",
               baseline_label="moe_kernels.reference.expert_ffn (loop over w.unbind(0))"),
        {"routed_rows": rows, "hidden": h, "ffn": f, "experts": E, "topk": args.topk, "repeat": args.repeat,
         "threads": torch.get_num_threads()},
        [Result("moe experts vs w[e] loop", ms(t_grouped), ms(t_loop), "ms", higher_is_better=False,
                ours_label="grouped_experts", baseline_label="training.model.moe.loop_experts (w[e]: zero grad per expert)")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
