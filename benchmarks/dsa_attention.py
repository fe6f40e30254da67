"""DSA sparse attention vs dense attention on CPU at 4K / 16K / 64K tokens (time and FLOPs).

One MLA attention layer's core, forward, one sequence, causal, in MLA's absorbed form
(queries folded through W_UK; every head reads the shared latent c_kv + RoPE key, as decoding
and DeepSeek's sparse kernel do). Shapes are GLM-5's per-head structure scaled down so 64K runs
on a CPU: 8 heads, kv_lora 128, rope 32; indexer 4 heads x 32 (GLM-5: 64 heads, kv_lora 512,
rope 64, indexer 32 x 128 — the indexer is a few % of dense attention per key in both);
top-k 2048 (GLM-5's ``dsa_indexer_topk``).

* ours: ``training.model.dsa`` — lightning-indexer scores over all past keys, top-k selection
  (stable sort), gather of the selected latents, attention over them (``sparse_mla``);
* baseline: dense causal attention over the same latents with PyTorch's
  ``scaled_dot_product_attention`` (same absorbed form, so the same FLOPs per key).

Time: queries are processed in blocks of ``--block``; both sides are timed on the same
``--samples`` evenly spaced query blocks (the last key of block i is at (i+1)*block) and the
mean is scaled to all L/block blocks. Per-block cost is linear in the block's position for both
sides, so evenly spaced samples estimate the total without bias; every block is not run
because dense attention at 64K takes many minutes on a CPU. FLOPs are counted analytically
(``training.model.dsa.dsa_flops``: matmul FLOPs of scores + weighted sum, and the indexer's).
Writes out/bench/dsa_attention.json. Run: `python benchmarks/dsa_attention.py [--lengths 4096,16384,65536]`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from _report import Result, write

from training.model.dsa import dsa_flops, index_scores, select_topk, sparse_mla

H, KV_LORA, ROPE, NH, HD = 8, 128, 32, 4, 32


def inputs(L: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    return {
        "q_lat": r(1, L, H, KV_LORA) / KV_LORA**0.5,
        "q_rope": r(1, L, H, ROPE),
        "c_kv": r(1, L, KV_LORA),
        "k_rope": r(1, L, ROPE),
        "qi": r(1, L, NH, HD),
        "ki": r(1, L, HD),
        "wi": r(1, L, NH).softmax(-1),
    }


def sparse_block(x: dict, t0: int, t1: int, topk: int, scale: float) -> torch.Tensor:
    keys = torch.arange(t1)
    allowed = (keys[None, :] <= torch.arange(t0, t1)[:, None])[None]  # [1, T, t1]
    scores = index_scores(x["qi"][:, t0:t1], x["ki"][:, :t1], x["wi"][:, t0:t1], allowed)
    idx, valid = select_topk(scores, topk)
    out, _ = sparse_mla(x["q_lat"][:, t0:t1], x["q_rope"][:, t0:t1], x["c_kv"], x["k_rope"], idx, valid, scale)
    return out


def dense_block(x: dict, t0: int, t1: int, scale: float) -> torch.Tensor:
    q = torch.cat((x["q_lat"][:, t0:t1], x["q_rope"][:, t0:t1]), -1).transpose(1, 2)  # [1, H, T, d]
    k = torch.cat((x["c_kv"][:, :t1], x["k_rope"][:, :t1]), -1)[:, None]  # [1, 1, t1, d], shared
    v = x["c_kv"][:, :t1][:, None]
    mask = torch.arange(t1)[None, :] <= torch.arange(t0, t1)[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(L: int, topk: int, block: int, samples: int) -> dict:
    x = inputs(L)
    scale = (KV_LORA // 2 + ROPE) ** -0.5
    n_blocks = L // block
    picks = sorted({min(n_blocks - 1, int((i + 0.5) * n_blocks / samples)) for i in range(samples)})
    with torch.no_grad():
        sparse_block(x, 0, block, topk, scale), dense_block(x, 0, block, scale)  # warm-up
        t_sparse = [timed(lambda b=b: sparse_block(x, b * block, (b + 1) * block, topk, scale)) for b in picks]
        t_dense = [timed(lambda b=b: dense_block(x, b * block, (b + 1) * block, scale)) for b in picks]
        if L <= 4096:  # where everything fits: sparse with top-k >= L is dense attention
            b = picks[-1]
            same = sparse_block(x, b * block, (b + 1) * block, L, scale)
            ref = dense_block(x, b * block, (b + 1) * block, scale).transpose(1, 2)
            assert torch.allclose(same, ref, atol=1e-4), (same - ref).abs().max()
    flops = dsa_flops(L, H, KV_LORA, ROPE, NH, HD, topk)
    return {
        "L": L,
        "sparse_s": statistics.fmean(t_sparse) * n_blocks,
        "dense_s": statistics.fmean(t_dense) * n_blocks,
        "sparse_gflop": flops["sparse"] / 1e9,
        "dense_gflop": flops["dense"] / 1e9,
        "indexer_gflop": flops["indexer"] / 1e9,
        "blocks_timed": len(picks),
        "blocks": n_blocks,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="4096,16384,65536")
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--block", type=int, default=128, help="queries per block")
    ap.add_argument("--samples", type=int, default=4, help="query blocks timed per length")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"{'L':>7} {'dense s':>9} {'DSA s':>9} {'x faster':>9} {'dense GFLOP':>12} {'DSA GFLOP':>10} {'x fewer':>8}")
    for L in map(int, args.lengths.split(",")):
        m = measure(L, args.topk, args.block, args.samples)
        rows.append(m)
        print(f"{L:>7} {m['dense_s']:9.2f} {m['sparse_s']:9.2f} {m['dense_s'] / m['sparse_s']:9.2f} "
              f"{m['dense_gflop']:12.1f} {m['sparse_gflop']:10.1f} {m['dense_gflop'] / m['sparse_gflop']:8.2f}")  # fmt: skip
    results = [
        Result(f"dsa attention time {m['L'] // 1024}K", m["sparse_s"], m["dense_s"], "s", higher_is_better=False,
               ours_label=f"DSA: indexer + top-{args.topk} sparse MLA (training.model.dsa)",
               baseline_label="dense causal SDPA over the same latents",
               extra={"gflop_ours": round(m["sparse_gflop"], 2), "gflop_baseline": round(m["dense_gflop"], 2),
                      "gflop_indexer": round(m["indexer_gflop"], 2),
                      "timed_blocks": f"{m['blocks_timed']} of {m['blocks']}"})
        for m in rows
    ]  # fmt: skip
    head = max(range(len(rows)), key=lambda i: rows[i]["L"])
    results[head].goal = 2.0  # at the longest context the sparse layer must at least halve the time
    also = [r for i, r in enumerate(results) if i != head]
    also += [
        Result(f"dsa attention flops {m['L'] // 1024}K", m["sparse_gflop"], m["dense_gflop"], "GFLOP",
               higher_is_better=False, ours_label="DSA", baseline_label="dense")
        for m in rows
    ]  # fmt: skip
    write(
        __file__,
        results[head],
        {"lengths": args.lengths, "topk": args.topk, "heads": H, "kv_lora": KV_LORA, "rope": ROPE,
         "indexer_heads": NH, "indexer_head_dim": HD, "block": args.block, "samples": args.samples,
         "threads": torch.get_num_threads(), "dtype": "float32", "device": "cpu"},
        also,
    )  # fmt: skip


if __name__ == "__main__":
    main()
