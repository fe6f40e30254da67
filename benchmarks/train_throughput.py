"""Training tokens/s of the tiny GLM-5-shaped config vs the walking skeleton's dense TinyLM.

Both train on the same shards (default: out/demo/shards; synthetic shards otherwise) with the
same batch for the same steps. Baseline: ``training.model.tiny_lm`` (dense, MHA, AdamW) at the same
hidden size. Writes out/bench/train_throughput.json. Run: `python benchmarks/train_throughput.py [--steps 8]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _report import Result, write

from core.shards import ShardWriter, TokenizerInfo
from training.model.tiny_lm import TinyLMConfig
from training.train_config import load_trainer_config
from training.train_loop import TrainConfig
from training.train_loop import train as train_tiny_lm
from training.trainer import train


def synthetic(out: Path, seq_len: int = 512, n: int = 256) -> Path:
    rng = np.random.default_rng(0)
    with ShardWriter(
        out, seq_len=seq_len, tokenizer=TokenizerInfo(id="bench", vocab_size=8192, eos_id=0), stage="bench"
    ) as w:
        for _ in range(n):
            w.add(rng.integers(0, 8192, seq_len, dtype=np.int32), [seq_len], "bench")
    return out


def tokens_per_s(metrics: list[dict]) -> float:
    steady = metrics[2:] or metrics  # skip warm-up steps
    return sum(m["tokens"] for m in steady) / sum(m["tokens"] / m["tokens_per_s"] for m in steady)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", type=Path, default=Path("configs/train_tiny.yaml"))
    ap.add_argument("--shards", type=Path, default=Path("out/demo/shards"))
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    cfg = load_trainer_config(args.config)
    cfg.steps = args.steps
    with tempfile.TemporaryDirectory() as tmp:
        shards = args.shards if (args.shards / "manifest.json").is_file() else synthetic(Path(tmp) / "shards")
        t0 = time.perf_counter()
        ours = tokens_per_s(train(cfg, shards, log=lambda m: None).metrics)
        t_ours = time.perf_counter() - t0
        base_cfg = TrainConfig(
            steps=args.steps,
            threads=cfg.threads,
            loader=cfg.loader,
            model=TinyLMConfig(
                d_model=cfg.model.hidden_size,
                n_layers=cfg.model.num_layers,
                n_heads=4,
                d_ff=cfg.model.ffn_hidden_size,
                max_seq_len=8192,
            ),
        )
        base = tokens_per_s(train_tiny_lm(shards, base_cfg, log=lambda m: None)["metrics"])
    print(f"shards {shards}, batch {cfg.loader.batch_size}, {args.steps} steps ({t_ours:.0f} s)")
    print(f"  TinyLM dense baseline:        {base:10.0f} tokens/s")
    print(f"  tiny GLM-5-shaped (MLA, MoE, MTP, {cfg.optimizer.name}): {ours:10.0f} tokens/s")
    print(f"ratio glm/tiny_lm tokens/s: {ours / base:.2f}")
    write(
        __file__,
        Result("tiny glm-5 training", ours, base, "tokens/s",
               ours_label=f"tiny GLM-5-shaped (MLA, MoE, MTP, {cfg.optimizer.name})",
               baseline_label="training.model.tiny_lm dense TinyLM (MHA, AdamW), same hidden size"),
        {"config": str(args.config), "shards": str(shards), "steps": args.steps, "batch": cfg.loader.batch_size},
    )  # fmt: skip


if __name__ == "__main__":
    main()
