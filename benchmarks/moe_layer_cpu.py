"""Reference-path MoE layer on CPU: experts as grouped GEMMs (``torch._grouped_mm``) vs a loop.

The whole ``training.model.moe.MoELayer`` (router, permute, experts, unpermute, shared expert),
forward + backward, torch backend; only the experts step differs. Baseline: the fair per-expert
loop, ``moe_kernels.reference.expert_ffn`` (matmuls over ``w.unbind(0)``: one stack in backward).
``training.model.moe.loop_experts`` (``w[e]`` indexing: one full-size zero gradient per expert in
backward) is shown as a second row. The Triton backend is not timed here: on CPU it runs in
Triton's interpreter (benchmarks/kernels_gpu.py times it). Writes out/bench/moe_layer_cpu.json.
Run: `python benchmarks/moe_layer_cpu.py [--tokens 4096]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch
from _report import Result, write

from moe_kernels import reference
from training.model.config import ModelConfig
from training.model.moe import MoELayer, grouped_experts, loop_experts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=128, help="expert FFN size")
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    # 1 by default: on a shared machine an oversubscribed second thread makes timings erratic
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (both sides)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = ModelConfig(
        hidden_size=a.hidden, num_moe_experts=a.experts, moe_router_topk=a.topk, moe_ffn_hidden_size=a.ffn,
        moe_shared_expert_intermediate_size=a.ffn, moe_router_topk_scaling_factor=2.5,
    )  # fmt: skip
    layer = MoELayer(cfg)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.02)
    x = torch.randn(1, a.tokens, a.hidden)
    grouped_backend = layer.backend
    loop_backend = dataclasses.replace(grouped_backend, experts=loop_experts)
    assert grouped_backend.experts is grouped_experts

    def run(backend) -> float:
        layer.backend = backend
        layer(x)[0].sum().backward()  # warm-up
        best = float("inf")  # best of --repeat: the machine is shared, the minimum is the signal
        for _ in range(a.repeat):
            layer.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            layer(x)[0].sum().backward()
            best = min(best, time.perf_counter() - t0)
        return best

    unbind_backend = dataclasses.replace(grouped_backend, experts=reference.expert_ffn)
    t_unbind = t_grouped = t_loop = float("inf")
    for _ in range(2):  # interleaved rounds: a burst of load from elsewhere hits every variant alike
        t_unbind = min(t_unbind, run(unbind_backend))
        t_grouped = min(t_grouped, run(grouped_backend))
        t_loop = min(t_loop, run(loop_backend))
    print(f"MoE layer, {a.tokens} tokens, hidden {a.hidden}, {a.experts} experts top-{a.topk}, "
          f"expert ffn {a.ffn}, forward+backward, {torch.get_num_threads()} threads")  # fmt: skip
    print(f"  loop over w.unbind(0) (baseline): {t_unbind * 1e3:8.1f} ms")
    print(f"  loop over w[e]:                   {t_loop * 1e3:8.1f} ms")
    print(f"  torch._grouped_mm:                {t_grouped * 1e3:8.1f} ms")
    ms = lambda t: t * 1e3  # noqa: E731
    write(
        __file__,
        Result("moe layer grouped_mm", ms(t_grouped), ms(t_unbind), "ms", goal=1.3, higher_is_better=False,
               ours_label="MoELayer, torch backend (grouped_experts)",
               baseline_label="MoELayer with moe_kernels.reference.expert_ffn (loop over w.unbind(0))"),
        {"tokens": a.tokens, "hidden": a.hidden, "ffn": a.ffn, "experts": a.experts, "topk": a.topk,
         "repeat": a.repeat, "threads": torch.get_num_threads()},
        [Result("moe layer vs w[e] loop", ms(t_grouped), ms(t_loop), "ms", higher_is_better=False,
                ours_label="MoELayer, grouped_experts", baseline_label="MoELayer with training.model.moe.loop_experts")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
