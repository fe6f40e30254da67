"""Training tokens/s of the Megatron-core path vs our trainer on the same model, shards and batches.

Same YAML (default configs/train_tiny.yaml), same initial weights (ours, converted by the bridge),
same steps, one process each on the CPU (Megatron on a gloo world of 1 with its CPU stand-ins,
training/megatron/cpu.py). Ours (training.trainer) is the baseline; the ratio is Megatron's
tokens/s over ours. Also records the largest |loss| difference between the two curves.
Writes out/bench/megatron_vs_ours.json. Run: `python benchmarks/megatron_vs_ours.py [--steps 12]`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _report import Result, write
from train_throughput import synthetic, tokens_per_s

from training.megatron.train import train as megatron_train
from training.train_config import load_trainer_config
from training.trainer import train as our_train

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "train_tiny.yaml")
    ap.add_argument("--shards", type=Path, default=ROOT / "out" / "demo" / "shards")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--optimizer", default=None, help="override optimizer.name (adamw, muon, muon_split)")
    args = ap.parse_args()
    sets = [f"steps={args.steps}"] + ([f"optimizer.name={args.optimizer}"] if args.optimizer else [])
    cfg = load_trainer_config(args.config, sets)
    quiet = {"log": lambda m: None}
    with tempfile.TemporaryDirectory() as tmp:
        shards = args.shards if (args.shards / "manifest.json").is_file() else synthetic(Path(tmp) / "shards")
        ours = our_train(cfg, shards, **quiet).metrics
        meg = megatron_train(load_trainer_config(args.config, sets), shards, **quiet).metrics
    t_ours, t_meg = tokens_per_s(ours), tokens_per_s(meg)
    dloss = max(abs(a["loss"] - b["loss"]) for a, b in zip(ours, meg, strict=True))
    print(f"shards {shards}, batch {cfg.loader.batch_size}, {args.steps} steps, {cfg.optimizer.name}")
    print(f"  ours (training.trainer):        {t_ours:10.0f} tokens/s")
    print(f"  Megatron-core (training.megatron): {t_meg:10.0f} tokens/s")
    print(f"  max |loss difference| over the curve: {dloss:.2e}")
    write(
        __file__,
        Result("megatron-core vs ours training", t_meg, t_ours, "tokens/s",
               ours_label="training.megatron: Megatron GPTModel (local spec), schedule, DDP, FP32Optimizer",
               baseline_label="training.trainer (ours, pure PyTorch), same model/weights/batches",
               extra={"max_abs_loss_diff": dloss}),
        {"config": str(args.config), "shards": str(shards), "steps": args.steps, "batch": cfg.loader.batch_size,
         "optimizer": cfg.optimizer.name, "threads": cfg.threads},
    )  # fmt: skip


if __name__ == "__main__":
    main()
