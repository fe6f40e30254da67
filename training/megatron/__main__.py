"""``python -m training.megatron``: train with Megatron-core from our shards and YAML (see ``train.py``);
``python -m training.megatron convert --to ours|megatron --checkpoint SRC --out DIR``: checkpoints
between the two trainers (see ``convert.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from core.cli import user_errors
from core.errors import UserError
from training.megatron.train import load_megatron_config, train

# the shipped config, found from any working directory
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "train_tiny.yaml"

app = typer.Typer(add_completion=False, help="Train the GLM-5-shaped model with Megatron-core on Arrow shards "
                  "(no command), or convert checkpoints between Megatron and ours (convert).")


@app.callback(invoke_without_command=True)
@user_errors
def main(
    ctx: typer.Context,
    config: Path = typer.Option(DEFAULT_CONFIG, help="trainer YAML (the one our trainer reads)"),
    shards: Path = typer.Option(None, help="shard directory (one stage); default: the config's stages"),
    steps: int = typer.Option(None, help="optimizer steps when training one shard directory"),
    metrics: Path = typer.Option(None, help="write one JSON object per step here"),
    checkpoint_dir: Path = typer.Option(None, help="save Megatron dist checkpoints here (overrides checkpoint.dir)"),
    resume: bool = typer.Option(False, help="continue from the latest checkpoint in the checkpoint dir"),
    init_from: Path = typer.Option(None, help="start from these weights (our checkpoint, an HF-imported one, or a "
                                   "Megatron dist checkpoint) at step 0; a checkpoint to --resume from wins"),
    stop_after: int = typer.Option(None, help="train at most this many steps in this call, then checkpoint and exit"),
    override: list[str] = typer.Option(
        [], "--set", help="override a config key, e.g. --set parallel.tensor_model_parallel_size=2"
    ),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    cfg = load_megatron_config(config, override)
    if steps is not None:
        cfg.steps = steps
    if checkpoint_dir is not None:
        cfg.checkpoint.dir = str(checkpoint_dir)
    result = train(cfg, shards, metrics, resume=resume, stop_after=stop_after, init_from=init_from)
    if os.environ.get("RANK", "0") != "0":
        return
    if not result.metrics:
        typer.echo(f"nothing left to train: the checkpoint is at step {result.step}")
        return
    first, last = result.metrics[0]["loss"], result.metrics[-1]["loss"]
    typer.echo(f"trained {len(result.metrics)} steps with Megatron-core: loss {first:.4f} -> {last:.4f}")
    if result.checkpoint:
        typer.echo(f"checkpoint: {result.checkpoint}")


@app.command("convert")
@user_errors
def convert_cmd(
    to: str = typer.Option(..., help="ours: Megatron dist checkpoint -> ours (then `python -m training.hf export`); "
                           "megatron: ours -> a weights-only Megatron dist checkpoint"),
    checkpoint: Path = typer.Option(..., help="source: a checkpoint directory or one step-* in it"),
    out: Path = typer.Option(..., help="checkpoint directory to write (step-00000000 inside)"),
) -> None:
    """Checkpoints between the trainers: weights (TP slices gathered), config; a fresh optimizer at step 0."""
    from training.megatron.convert import to_megatron, to_ours

    if to not in ("ours", "megatron"):
        raise UserError(f"--to {to!r}: ours or megatron")
    (to_ours if to == "ours" else to_megatron)(checkpoint, out)


if __name__ == "__main__":
    app()
