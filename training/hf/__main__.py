"""``python -m training.hf export|import|config|logits``: Hugging Face checkpoints in and out.

    python -m training.hf export --checkpoint CKPT --out HF_DIR     # ours -> transformers directory
    python -m training.hf import --hf HF_DIR --out CKPT             # transformers directory -> ours
    python -m training.hf config --config configs/glm5_744b.yaml --out config.json   # no weights
    python -m training.hf logits --checkpoint CKPT --input-ids IDS.json --out LOGITS.npy
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from core.cli import run_app, user_errors
from core.errors import InputError, UserError
from core.io import atomic_write_text

app = typer.Typer(add_completion=False, help="Hugging Face checkpoints in and out of our GLM model.")
REPO = Path(__file__).resolve().parents[2]


def _in_repo(path: Path) -> Path:
    """A relative default that does not exist here is taken from the repository (any working dir)."""
    return path if path.exists() or path.is_absolute() else REPO / path


@app.command("export")
@user_errors
def export_cmd(
    checkpoint: Path = typer.Option(..., help="checkpoint directory (trainer --checkpoint-dir) or one step-* in it"),
    out: Path = typer.Option(..., help="Hugging Face model directory to write"),
    arch: str = typer.Option(None, help="glm_moe_dsa | glm4_moe | deepseek_v3 (default: from the model)"),
    dtype: str = typer.Option("float32", help="float32 | bfloat16 | float16"),
    max_shard_gb: float = typer.Option(5.0, help="safetensors shard size; larger models get an index"),
) -> None:
    """Our checkpoint -> a Hugging Face model directory (config.json, safetensors, tokenizer)."""
    from training.hf.convert import export_checkpoint

    export_checkpoint(checkpoint, out, arch, dtype, int(max_shard_gb * 2**30))


@app.command("import")
@user_errors
def import_cmd(
    hf: Path = typer.Option(..., help="Hugging Face model directory (config.json + safetensors)"),
    out: Path = typer.Option(..., help="checkpoint directory to write (step-00000000 inside)"),
) -> None:
    """A Hugging Face model directory -> our checkpoint (OUT/step-00000000), ready to train or serve."""
    from training.hf.convert import import_hf

    import_hf(hf, out)


@app.command("config")
@user_errors
def config_cmd(
    config: Path = typer.Option(Path("configs/glm5_744b.yaml"), help="trainer YAML (its model section is used)"),
    out: Path = typer.Option(Path("config.json"), help="config.json to write"),
    arch: str = typer.Option(None, help="glm_moe_dsa | glm4_moe | deepseek_v3 (default: from the model)"),
    dtype: str = typer.Option("bfloat16", help="the dtype config.json names"),
) -> None:
    """A trainer YAML's model -> the Hugging Face config.json (no weights)."""
    from training.hf.convert import hf_config_json
    from training.train_config import load_trainer_config

    cfg = load_trainer_config(_in_repo(config)).model
    if cfg.vocab_size <= 0:
        raise UserError(f"{config}: model.vocab_size is 0 (taken from shards at training time); set it")
    conf = hf_config_json(cfg, arch, dtype, {})
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(conf, indent=2, sort_keys=True))
    typer.echo(f"{conf['model_type']} config ({cfg.num_layers} layers, hidden {cfg.hidden_size}) -> {out}")


@app.command("logits")
@user_errors
def logits_cmd(
    checkpoint: Path = typer.Option(..., help="checkpoint directory or one step-* in it"),
    input_ids: Path = typer.Option(..., help="JSON list of token ids (one sequence)"),
    out: Path = typer.Option(Path("logits.npy"), help="float32 [len(ids), vocab] .npy to write"),
) -> None:
    """float32 logits (len(ids) x vocab) of one sequence, no MTP -> .npy."""
    import numpy as np

    from training.hf.convert import logits

    if not input_ids.is_file():
        raise InputError(f"--input-ids: {input_ids} not found")
    try:
        ids = json.loads(input_ids.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"--input-ids: {input_ids} is not JSON: {err}") from None
    if not isinstance(ids, list):
        raise InputError(f"--input-ids: {input_ids} must hold a JSON list of ints")
    arr = logits(checkpoint, ids).numpy().astype(np.float32)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:  # np.save(path) would append .npy to any other name
        np.save(f, arr)
    typer.echo(f"logits {list(arr.shape)} float32 -> {out}")


if __name__ == "__main__":
    run_app(app)
