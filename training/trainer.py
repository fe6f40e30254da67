"""The trainer: GLM-5-shaped model on Arrow shards, Muon/MuonSplit/AdamW, stages, checkpoints.

``python -m training.trainer --config configs/train_tiny.yaml --shards out/demo/shards
--metrics out/train/metrics.jsonl`` trains and writes one JSON object per step. A config with
``stages:`` trains them in order (mid-training: each stage names a shard directory; its
sequence length and shard set come from that directory's manifest), under one LR schedule
over all steps. Checkpoints (``checkpoint.dir``, every ``checkpoint.every`` steps and at the end,
the newest ``checkpoint.keep`` kept) hold everything a run needs to continue bit-exactly:
weights, optimizer state, RNG state, step and the loader position.

Per step: forward + loss (LM + MTP + optional sequence aux loss + DSA indexer KL) under
optional bf16 autocast, backward, gradient clipping, optimizer step, optional QK-clip, then the
aux-loss-free expert-bias update from the step's expert loads. With a DSA indexer, the first
``dsa_warmup_steps`` steps are DeepSeek-V3.2's dense warm-up: dense attention, and only the
indexer's parameters are updated (by its KL toward the dense attention); then sparse attention.

Under ``torchrun --nproc-per-node N -m training.trainer ...`` the same loop runs data parallel
(FSDP2) and expert parallel (``parallel.expert_model_parallel_size``) over N ranks; see
``training/distributed.py``. ``loader.batch_size`` is the global batch either way, so N ranks
see exactly the sequences one process would, and checkpoints (``torch.distributed.checkpoint``)
resume on another N.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import typer

from core.cli import user_errors
from core.errors import ConfigError
from core.shards import read_manifest
from core.tokenizer import locate_tokenizer
from training import distributed
from training.checkpoint import (
    checkpoint_step,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from training.dist_checkpoint import is_dcp_checkpoint, load_dcp, save_dcp
from training.loader import ShardLoader
from training.metrics_log import MetricsSink
from training.model.glm import GLMModel
from training.optim.optimizers import build_optimizer, qk_clip_
from training.optim.schedules import lr_at
from training.train_config import (
    TrainerConfig,
    TrainStageConfig,
    build_model,
    load_trainer_config,
    resolve_stages,
    stage_at,
    with_init_model,
)


@dataclass
class TrainResult:
    step: int
    metrics: list[dict[str, Any]]
    model: GLMModel
    checkpoint: Path | None = None
    stages: list[TrainStageConfig] = field(default_factory=list)


def train(
    cfg: TrainerConfig,
    shards: str | Path | None = None,
    metrics_path: str | Path | None = None,
    log: Callable[[str], None] = print,
    stop_after: int | None = None,
    resume: bool = True,
) -> TrainResult:
    """Train until the last stage ends (or ``stop_after`` steps in this call, then checkpoint).
    With ``resume`` and a checkpoint in ``checkpoint.dir``, continue from the latest one."""
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        return _train(with_init_model(cfg), shards, metrics_path, log, stop_after, resume)
    finally:
        torch.set_num_threads(threads)  # the setting is process-wide: do not leak it


def _train(cfg, shards, metrics_path, log, stop_after, resume) -> TrainResult:
    p = cfg.parallel
    par = distributed.from_env(
        p.tensor_model_parallel_size, p.pipeline_model_parallel_size, p.expert_model_parallel_size
    )
    try:
        return _train_loop(cfg, shards, metrics_path, log, stop_after, resume, par)
    finally:
        if par is not None:
            par.close()


def _train_loop(cfg, shards, metrics_path, log, stop_after, resume, par) -> TrainResult:
    stages = resolve_stages(cfg, shards)
    total = sum(s.steps for s in stages)
    model = build_model(cfg, stages)
    ckpt_dir = Path(cfg.checkpoint.dir) if cfg.checkpoint.dir else None
    found = latest_checkpoint(ckpt_dir) if (ckpt_dir and resume) else None
    if found is None and cfg.init_from:  # before sharding: every rank loads the whole model
        start = checkpoint_step(cfg.init_from)
        load_checkpoint(start, model)
        log(f"starting from the weights of {start}")
    world, rank = (par.world, par.rank) if par else (1, 0)
    if par is not None:
        if cfg.optimizer.qk_clip_tau:
            raise ConfigError("optimizer.qk_clip_tau: QK-clip is not implemented under torchrun (FSDP-sharded q/k)")
        model = par.shard(model)
        if not par.is_main:
            log = _quiet
    opt = build_optimizer(model, cfg.optimizer)
    step, loader_state = 0, None
    if found is not None:
        if par is not None or is_dcp_checkpoint(found):
            saved = load_dcp(found, model, opt, par)
        else:
            saved = load_checkpoint(found, model, opt)
        step, loader_state = saved["step"], saved.get("loader")
        log(f"resumed from {found} at step {step}")
    dsa_warmup = cfg.dsa_warmup_steps if cfg.model.dsa_indexer_n_heads else 0
    warm_only = set(model.indexer_params()) if dsa_warmup else set()
    clip = cfg.optimizer.qk_clip_tau
    model.set_record_max_logits(bool(clip) or cfg.record_max_logits)
    autocast = (
        torch.autocast("cpu" if not torch.cuda.is_available() else "cuda", dtype=torch.bfloat16)
        if cfg.precision == "bf16"
        else contextlib.nullcontext()
    )
    sink = MetricsSink(
        metrics_path if rank == 0 else None,
        append=step > 0,
        from_step=step,
        tensorboard_dir=cfg.tensorboard_dir if rank == 0 else None,
        log=log,
    )
    metrics: list[dict[str, Any]] = []
    done_here, last_ckpt = 0, None
    tok_info = read_manifest(stages[-1].shards).tokenizer
    tok_file = locate_tokenizer(tok_info, Path(stages[-1].shards))  # copied into checkpoints
    if tok_file is None and tok_info.path and rank == 0:
        log(f"warning: the shards' tokenizer {tok_info.path} ({tok_info.id}) is not there nor beside the shards: "
            "checkpoints will carry no tokenizer.json")
    model.train()
    try:
        while step < total and (stop_after is None or done_here < stop_after):
            idx, start = stage_at(stages, step)
            stage = stages[idx]
            global_batch = stage.batch_size or cfg.loader.batch_size
            loader_cfg = cfg.loader.model_copy(
                update={"batch_size": distributed.global_batch_split(global_batch, world)}
            )
            loader = ShardLoader(stage.shards, loader_cfg, rank, world)
            if loader_state is not None and loader_state.get("stage") == idx:
                loader.load_state_dict(loader_state["state"])
            batches = iter(loader)
            while step < start + stage.steps and (stop_after is None or done_here < stop_after):
                t0 = time.perf_counter()
                batch = next(batches)
                lr = lr_at(step, total, cfg.schedule, cfg.optimizer.lr)
                for group in opt.param_groups:
                    group["lr"] = lr
                if dsa_warmup:
                    model.set_dsa_dense(step < dsa_warmup)
                tokens, loss_mask = batch.tokens, batch.loss_mask
                if par is not None:  # NCCL ranks hold the model on their GPU
                    tokens = tokens.to(par.device)
                    loss_mask = None if loss_mask is None else loss_mask.to(par.device)
                with autocast:
                    out = model.loss(tokens, batch.doc_lens, loss_mask=loss_mask)
                opt.zero_grad(set_to_none=True)
                out["loss"].backward()
                if step < dsa_warmup:  # dense warm-up: only the indexer learns
                    for name, prm in model.named_parameters():
                        if name not in warm_only:
                            prm.grad = None
                if par is None:
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                else:
                    par.finish_expert_grads(model)
                    grad_norm = par.clip_grad_norm_(model, cfg.grad_clip)
                opt.step()
                values = {k: v.detach() for k, v in out.items()}
                scalars = {k: float(v) for k, v in values.items()} if par is None else par.mean(values)
                rec: dict[str, Any] = {"step": step, **{k: round(v, 6) for k, v in scalars.items()}}
                if (max_logit := model.max_attention_logit()) is not None:
                    rec["max_attn_logit"] = round(max_logit if par is None else par.max(max_logit), 4)
                if clip:
                    rec["qk_clipped_heads"] = qk_clip_(model, clip)
                balance = model.update_expert_bias(par.group if par else None, move=step >= dsa_warmup)
                dt = time.perf_counter() - t0
                rec.update(
                    lr=lr,
                    grad_norm=round(float(grad_norm), 6),
                    expert_load_max_over_mean=None if balance is None else round(balance, 4),
                    stage=stage.name,
                    seq_len=loader.seq_len,
                    epoch=loader.epoch,
                    tokens=int(batch.tokens.numel()) * world,
                    tokens_per_s=round(batch.tokens.numel() * world / dt, 1),
                )
                if cfg.model.dsa_indexer_n_heads:  # every DSA run says its mode (a mid-training run has no warm-up)
                    rec["dsa"] = "dense_warmup" if step < dsa_warmup else "sparse"
                metrics.append(rec)
                sink.write(rec)
                log(
                    f"step {step:5d}  [{stage.name}, L={loader.seq_len}]  loss {rec['loss']:.4f}  "
                    f"lm {rec['lm_loss']:.4f}  lr {lr:.2e}  {rec['tokens_per_s']:.0f} tok/s"
                )
                step += 1
                done_here += 1
                loader_state = {"stage": idx, "state": loader.state_dict()}
                if ckpt_dir and cfg.checkpoint.every and step % cfg.checkpoint.every == 0:
                    last_ckpt = _save(ckpt_dir, step, model, opt, loader_state, cfg, par, tok_file)
            loader_state = None  # the next stage starts at its loader's beginning
        if ckpt_dir and done_here and (last_ckpt is None or not last_ckpt.name.endswith(f"{step:08d}")):
            last_ckpt = _save(ckpt_dir, step, model, opt, {"stage": idx, "state": loader.state_dict()}, cfg, par,
                              tok_file)
    finally:
        sink.close()
    return TrainResult(step, metrics, model, last_ckpt, stages)


def _save(ckpt_dir: Path, step: int, model, opt, loader_state, cfg: TrainerConfig, par=None,
          tokenizer: Path | None = None) -> Path:
    extra = {"loader": loader_state, "config": cfg.model_dump(mode="json")}
    if par is not None:
        path = save_dcp(ckpt_dir, step, model, opt, extra, par)
    else:
        path = save_checkpoint(ckpt_dir, step, model, opt, extra)
        if tokenizer and Path(tokenizer).is_file():  # the tokenizer travels with the weights to the next stage
            shutil.copy(tokenizer, path / "tokenizer.json")
    if par is None or par.is_main:  # after the new one is published: the newest K stay complete
        prune_checkpoints(ckpt_dir, cfg.checkpoint.keep)
    return path


def _quiet(msg: str) -> None:
    """Log sink of ranks other than 0 (rank 0 speaks for the run)."""


app = typer.Typer(add_completion=False, help="Train the GLM-5-shaped model on Arrow shards.")


@app.command()
@user_errors
def main(
    config: Path = typer.Option(Path("configs/train_tiny.yaml"), help="trainer YAML"),
    shards: Path = typer.Option(None, help="shard directory (one stage); default: the config's stages"),
    steps: int = typer.Option(None, help="optimizer steps when training one shard directory"),
    metrics: Path = typer.Option(None, help="write one JSON object per step here"),
    checkpoint_dir: Path = typer.Option(None, help="save checkpoints here (overrides checkpoint.dir)"),
    resume: bool = typer.Option(False, help="continue from the latest checkpoint in the checkpoint dir"),
    stop_after: int = typer.Option(
        None, help="train at most this many steps in this call, then checkpoint and exit (a time-limited job)"
    ),
    override: list[str] = typer.Option(
        [], "--set", help="override a config key, e.g. --set optimizer.name=adamw"
    ),
) -> None:
    cfg = load_trainer_config(config, override)
    if steps is not None:
        cfg.steps = steps
    if checkpoint_dir is not None:
        cfg.checkpoint.dir = str(checkpoint_dir)
    if cfg.backend == "megatron":  # same YAML, Megatron-core's engine
        from training.megatron.train import train as megatron_train

        result = megatron_train(cfg, shards, metrics, resume=resume, stop_after=stop_after)
    else:
        result = train(cfg, shards, metrics, resume=resume, stop_after=stop_after)
    if os.environ.get("RANK", "0") != "0":  # under torchrun rank 0 reports for the run
        return
    if not result.metrics:  # resumed from a checkpoint at the last step (killed before it exited)
        typer.echo(f"nothing left to train: the checkpoint is at step {result.step}")
        return
    first, last = result.metrics[0]["loss"], result.metrics[-1]["loss"]
    typer.echo(f"trained {len(result.metrics)} steps: loss {first:.4f} -> {last:.4f}")
    if result.checkpoint:
        typer.echo(f"checkpoint: {result.checkpoint}")


if __name__ == "__main__":
    app()
