"""Minimal train loop: the tiny LM on Arrow shards for N steps, loss logged per step.

``python -m training.train_loop --shards out/demo/shards --steps 20`` trains and writes one
JSON object per step to ``metrics.jsonl``. Resume is part of the contract: the loader's
``state_dict`` travels with the model and optimizer state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import typer
from pydantic import Field

from core.cli import user_errors
from core.config import StrictModel, load_config
from core.errors import UserError
from training.loader import LoaderConfig, ShardLoader
from training.metrics_log import MetricsSink
from training.model.tiny_lm import TinyLM, TinyLMConfig
from training.optim import schedules
from training.optim.schedules import ScheduleConfig


class TrainConfig(StrictModel):
    steps: int = Field(default=20, gt=0)
    lr: float = Field(default=3e-3, gt=0)
    warmup_steps: int = Field(default=5, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    seed: int = 0
    threads: int = Field(default=0, ge=0)  # torch intra-op threads; 0 = torch's default
    loader: LoaderConfig = LoaderConfig()
    model: TinyLMConfig = TinyLMConfig()


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup then cosine decay to 10% over ``cfg.steps`` (the trainer's cosine schedule)."""
    return schedules.lr_at(step, cfg.steps, ScheduleConfig(kind="cosine", warmup_steps=cfg.warmup_steps,
                                                           min_lr_ratio=0.1), cfg.lr)


def build(shard_dir: str | Path, cfg: TrainConfig) -> tuple[TinyLM, torch.optim.Optimizer, ShardLoader]:
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    loader = ShardLoader(shard_dir, cfg.loader)
    model_cfg = cfg.model.model_copy(
        update={"vocab_size": cfg.model.vocab_size or loader.manifest.tokenizer.vocab_size}
    )
    if model_cfg.vocab_size < loader.manifest.tokenizer.vocab_size:
        raise UserError(
            f"model vocab_size {model_cfg.vocab_size} < tokenizer vocab {loader.manifest.tokenizer.vocab_size}"
        )
    model = TinyLM(model_cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95))
    return model, opt, loader


def train(
    shard_dir: str | Path,
    cfg: TrainConfig,
    metrics_path: str | Path | None = None,
    log: Callable[[str], None] = print,
    state: dict[str, Any] | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train for ``cfg.steps`` (or until ``stop_after`` steps in this call); return the state
    (model, optimizer, loader, step, metrics) so a later call can resume from it."""
    model, opt, loader = build(shard_dir, cfg)
    step, metrics = 0, []
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        step, metrics = state["step"], list(state["metrics"])
    sink = MetricsSink(metrics_path, append=state is not None)  # a resumed run continues the file
    batches = iter(loader)
    done_here = 0
    try:
        while step < cfg.steps and (stop_after is None or done_here < stop_after):
            t0 = time.perf_counter()
            batch = next(batches)
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg)
            loss = model.loss(batch.tokens, batch.doc_lens)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            dt = time.perf_counter() - t0
            rec = {
                "step": step,
                "loss": round(loss.item(), 6),
                "lr": lr_at(step, cfg),
                "grad_norm": round(float(grad_norm), 6),
                "tokens": int(batch.tokens.numel()),
                "tokens_per_s": round(batch.tokens.numel() / dt, 1),
                "epoch": loader.epoch,
            }
            metrics.append(rec)
            sink.write(rec)
            log(
                f"step {step:4d}  loss {rec['loss']:.4f}  lr {rec['lr']:.2e}  {rec['tokens_per_s']:.0f} tok/s"
            )
            step += 1
            done_here += 1
    finally:
        sink.close()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "loader": loader.state_dict(),
        "step": step,
        "metrics": metrics,
    }


app = typer.Typer(add_completion=False, help="Train the tiny causal LM on Arrow shards.")


@app.command()
@user_errors
def main(
    shards: Path = typer.Option(..., help="shard directory (manifest.json + shard-*.arrow)"),
    steps: int = typer.Option(None, help="number of optimizer steps (overrides the config)"),
    config: Path = typer.Option(None, help="YAML TrainConfig"),
    metrics: Path = typer.Option(None, help="write one JSON object per step here"),
) -> None:
    cfg = load_config(TrainConfig, config) if config else TrainConfig()
    if steps is not None:
        cfg.steps = steps
    if metrics:
        metrics.parent.mkdir(parents=True, exist_ok=True)
    train(shards, cfg, metrics)


if __name__ == "__main__":
    app()
