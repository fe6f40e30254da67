"""Optimizer comparison: the same tiny MLA-MoE, data and steps under AdamW, Muon and MuonSplit.

``python -m training.tools.optimizer_comparison --shards out/demo/shards --steps 60`` trains
three copies from the same initialisation on the same batches and prints, side by side, the
final LM loss (mean of the last 5 steps) and the largest pre-softmax attention logit seen (the paper reports MuonSplit
keeps logits stable without clipping).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from training.train_config import TrainerConfig, load_trainer_config
from training.trainer import train

OPTIMIZERS = ("adamw", "muon", "muon_split")


def compare(
    cfg: TrainerConfig,
    shards: str | Path | None,
    optimizers: tuple[str, ...] = OPTIMIZERS,
    metrics_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    results = {}
    for name in optimizers:
        run = cfg.model_copy(deep=True)
        run.optimizer.name = name
        run.record_max_logits = True
        run.checkpoint.dir = None
        log(f"== {name}")
        path = metrics_dir / f"{name}.jsonl" if metrics_dir else None
        res = train(run, shards, path, log=lambda m: None)
        lm = [m["lm_loss"] for m in res.metrics]
        logits = [m["max_attn_logit"] for m in res.metrics]
        results[name] = {
            "first_lm_loss": lm[0],
            "final_lm_loss": sum(lm[-5:]) / len(lm[-5:]),
            "max_attn_logit": max(logits),
            "final_max_attn_logit": logits[-1],
            "steps": len(lm),
        }
        log(
            f"   final lm loss {results[name]['final_lm_loss']:.4f}  max logit {results[name]['max_attn_logit']:.2f}"
        )
    return results


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'optimizer':<12}{'first loss':>12}{'final loss':>12}{'max logit':>12}{'last logit':>12}"]
    for name, r in results.items():
        lines.append(
            f"{name:<12}{r['first_lm_loss']:>12.4f}{r['final_lm_loss']:>12.4f}"
            f"{r['max_attn_logit']:>12.2f}{r['final_max_attn_logit']:>12.2f}"
        )
    return "\n".join(lines)


app = typer.Typer(
    add_completion=False, help="Train the tiny MLA-MoE with AdamW, Muon and MuonSplit; compare."
)


@app.command()
@user_errors
def main(
    config: Path = typer.Option(Path("configs/train_tiny.yaml"), help="trainer YAML"),
    shards: Path = typer.Option(Path("out/demo/shards"), help="shard directory"),
    steps: int = typer.Option(60, help="optimizer steps per run"),
    metrics_dir: Path = typer.Option(None, help="write each run's metrics JSONL here"),
    override: list[str] = typer.Option([], "--set", help="override a config key"),
) -> None:
    cfg = load_trainer_config(config, override)
    cfg.steps = steps
    typer.echo(table(compare(cfg, shards, metrics_dir=metrics_dir)))


if __name__ == "__main__":
    app()
