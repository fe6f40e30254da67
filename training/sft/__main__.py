"""``python -m training.sft --config configs/sft_tiny.yaml [--out OUT] [--set key=value]``

Supervised fine-tuning end to end: read the chat datasets (``training.sft.data``), render them
with the GLM-5 template in the configured thinking mode, tokenize with the template's special
tokens added (to ``tokenizer.path``, or to a byte-level BPE trained on the data), mix the
categories by weight, pack into SFT shards (``loss_mask`` column; ``training.sft.pack``), then
train through ``training.trainer`` — the same model, loader, optimizer and checkpoints as
pre-training, the loss taken only on trained tokens. Writes ``OUT/tokenizer.json``,
``OUT/shards/``, ``OUT/checkpoints/``, ``OUT/metrics.jsonl`` and ``OUT/sft.json`` (counts,
rejects by reason, the mixture, first and last loss). Re-running resumes from the latest
checkpoint. With ``--set model.hf=HF_DIR`` a Hugging Face causal LM is fine-tuned instead
(``training.sft.hf``): its own tokenizer, with its own chat template or (``model.chat_template=glm5``)
GLM-5's in the configured thinking mode, its tokens added; checkpoints every ``train.checkpoint.every``
steps in ``OUT/hf_checkpoints`` (re-running resumes there too), the final model in ``OUT/hf``.

``init_from: CKPT`` starts from a checkpoint handed on by an earlier stage: ours (pre- or
mid-training's; its recorded model shape and the ``tokenizer.json`` beside it are used, so the
tokenizer must already hold the template's special tokens) or a Hugging Face directory (as
``model.hf``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic import Field

from core.cache import cache_dir
from core.cli import StepTimer, load_cli_config, user_errors
from core.config import StrictModel, load_yaml, validate_config
from core.errors import ConfigError
from core.io import atomic_write_text, read_jsonl
from core.tokenizer import TokenizerConfig, load_or_train, tokenizer_info
from training.chat_template import EOS, SPECIAL_RE, add_special_tokens, conversation_of, normalize, render
from training.policy import checkpoint_kind
from training.sft.data import DataConfig, ReadReport, category_weights, mix, read_records, tokenized_samples
from training.sft.hf import SFTModelConfig, run_hf
from training.sft.pack import write_sft_shards
from training.train_config import TrainerConfig
from training.trainer import train


class SFTConfig(StrictModel):
    out: str = "out/sft"
    data: DataConfig
    tokenizer: TokenizerConfig = TokenizerConfig(eos_token=EOS)
    sequences_per_shard: int = Field(default=2048, gt=0)
    # model.hf: fine-tune a Hugging Face causal LM directory instead (training.sft.hf)
    model: SFTModelConfig = SFTModelConfig()
    # start from an earlier stage's checkpoint, ours or a Hugging Face directory (see the docstring)
    init_from: str | None = None
    # the trainer: a trainer YAML (e.g. configs/glm5_744b.yaml) as the base, `train` keys on top
    trainer_config: str | None = None
    train: dict[str, Any] = {}


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def trainer_config(cfg: SFTConfig) -> TrainerConfig:
    base = load_yaml(cfg.trainer_config) if cfg.trainer_config else {}
    tcfg = validate_config(TrainerConfig, _merge(base, cfg.train), source="sft train")
    tcfg.model.check("sft train.model")
    return tcfg


def _corpus(cfg: DataConfig):
    """Plain text of every readable conversation (special tokens removed), for a BPE."""
    for ds in cfg.datasets:
        for _no, record in read_records(Path(ds.path)):
            try:
                msgs, tools = conversation_of(record)
                for s in render(normalize(msgs), "preserved", tools):
                    yield SPECIAL_RE.sub(" ", s.text)
            except Exception:  # noqa: BLE001 — rejects are counted when the data is read for real
                continue


def start_from(cfg: SFTConfig, tcfg: TrainerConfig) -> None:
    """Point the run at ``cfg.init_from``: an HF directory is ``model.hf``; our checkpoint is the
    trainer's ``init_from`` and its tokenizer the SFT tokenizer."""
    kind, path = checkpoint_kind(cfg.init_from)
    if kind == "hf":
        if cfg.model.hf and Path(cfg.model.hf) != path:
            raise ConfigError(f"init_from {path} and model.hf {cfg.model.hf}: give one")
        cfg.model.hf = str(path)
        return
    tcfg.init_from = str(path)
    if not cfg.tokenizer.path:
        tok = next((d / "tokenizer.json" for d in (path, path.parent) if (d / "tokenizer.json").is_file()), None)
        if tok is None:
            raise ConfigError(f"init_from: {path} has no tokenizer.json beside it; set tokenizer.path")
        cfg.tokenizer.path = str(tok)


def run(cfg: SFTConfig, log=print) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    timer = StepTimer(log)
    cfg.data.check()
    tcfg = trainer_config(cfg)  # a bad trainer config fails before any work
    if cfg.init_from:
        start_from(cfg, tcfg)
    if cfg.model.hf:  # the model's own tokenizer; OUT/hf is the final checkpoint
        return run_hf(cfg, tcfg, log)
    if cfg.model.chat_template != "own":
        raise ConfigError("model.chat_template: applies to a model.hf model; ours always uses GLM-5's")
    with timer("tokenizer"):
        tok, _ = load_or_train(cfg.tokenizer, None if cfg.tokenizer.path else _corpus(cfg.data), out)
        add_special_tokens(tok)
        tok_path = out / "tokenizer.json"
        atomic_write_text(tok_path, tok.to_str())
        info = tokenizer_info(tok, tok_path, cfg.tokenizer.eos_token)
        log(f"   {info.id}: {info.vocab_size} tokens (template special tokens included)")
    report = ReadReport()
    with timer("read + render + tokenize"):
        by_cat = tokenized_samples(cfg.data, tok, report)
        mixed = mix(by_cat, category_weights(cfg.data), cfg.data.total_samples, cfg.data.seed, report)
    with timer("pack"):
        manifest, pack_rejects = write_sft_shards(
            ((s.tokens, s.mask, s.category) for s in mixed), out / "shards", info, cfg.data.max_context,
            info.eos_id, stage="sft", sequences_per_shard=cfg.sequences_per_shard,
            config=cfg.model_dump(mode="json"),
        )  # fmt: skip
        report.rejects.update(pack_rejects)
    log(f"   conversations {report.conversations}: samples {dict(report.samples)}, mixture {dict(report.mixed)}, "
        f"rejects {dict(report.rejects) or 'none'}; {manifest.totals.sequences} sequences of {manifest.seq_len}")  # fmt: skip
    if tcfg.checkpoint.dir is None:
        tcfg.checkpoint.dir = str(out / "checkpoints")
    with timer("train"):
        result = train(tcfg, out / "shards", metrics_path=out / "metrics.jsonl", log=log, resume=True)
    # the whole run's steps: a re-run resumes from a checkpoint and trains only the rest (or none)
    steps = read_jsonl(out / "metrics.jsonl", "metrics") if (out / "metrics.jsonl").is_file() else []
    summary = {
        **report.as_dict(),
        "tokenizer": info.model_dump(),
        "sequences": manifest.totals.sequences,
        "trained_steps": result.step,
        "loss_first": steps[0]["loss"] if steps else None,
        "loss_last": steps[-1]["loss"] if steps else None,
        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
        "seconds": {k: round(v, 1) for k, v in timer.seconds.items()},
    }
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=1))
    return summary


ROOT = Path(__file__).resolve().parents[2]


def resolve_dataset_paths(cfg: SFTConfig) -> None:
    """A relative dataset path missing from the working directory is taken from the repository
    (the bundled samples that configs/sft_tiny.yaml names), else from the cache (what
    ``python -m samples post-train`` builds, configs/sft_smollm2.yaml), so the CLI works from any directory."""
    for ds in cfg.data.datasets:
        p = Path(ds.path)
        if p.is_absolute() or p.exists():
            continue
        found = next((base / p for base in (ROOT, cache_dir()) if (base / p).exists()), None)
        if found is not None:
            ds.path = str(found)


app = typer.Typer(add_completion=False, help="Supervised fine-tuning with the GLM-5 chat template.")


@app.command()
@user_errors
def main(
    config: Path = typer.Option(ROOT / "configs" / "sft_tiny.yaml", help="SFT YAML"),
    out: Path = typer.Option(None, help="output directory (overrides the config's out)"),
    override: list[str] = typer.Option([], "--set", help="override a config key, e.g. --set train.steps=5"),
) -> None:
    """SFT with the GLM-5 chat template: read and mix the chat datasets, pack them with loss
    masks, train with training.trainer; writes OUT/sft.json (counts, rejects, losses)."""
    cfg = load_cli_config(SFTConfig, config, override)
    if out is not None:
        cfg.out = str(out)
    resolve_dataset_paths(cfg)
    s = run(cfg)
    typer.echo(f"trained {s['trained_steps']} steps: loss {s['loss_first']} -> {s['loss_last']}; report {cfg.out}/sft.json")


if __name__ == "__main__":
    app()
