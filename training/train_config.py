"""One YAML, two trainers: the trainer config, its stages, and the model both trainers start from.

``training.trainer`` (ours) and ``training.megatron.train`` (Megatron-core, ``backend: megatron``)
read the same ``TrainerConfig``, walk the same stages and start from the same initial weights
(``build_model``, same seed). That shared piece lives here, below both, so neither trainer imports
the other for it (ours only dispatches to Megatron's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from core.config import StrictModel, load_config
from core.errors import ConfigError
from core.shards import read_manifest
from training.checkpoint import checkpoint_config, checkpoint_step
from training.loader import LoaderConfig
from training.megatron.options import MegatronOptions
from training.model.config import ModelConfig
from training.model.glm import GLMModel
from training.optim.optimizers import OptimizerConfig
from training.optim.schedules import ScheduleConfig


class TrainStageConfig(StrictModel):
    """The training side of a mid-training stage: which shards, how many steps (the shards'
    contents come from their job, e.g. ``LongCtxStageConfig`` for the long-context stages)."""

    name: str
    shards: str  # shard directory (manifest.json + shard-*.arrow)
    steps: int = Field(gt=0)
    batch_size: int | None = Field(default=None, gt=0)  # default: loader.batch_size
    manifest_stage: str | None = None  # if set, the manifest's `stage` must equal it


class CheckpointConfig(StrictModel):
    dir: str | None = None
    every: int = Field(default=0, ge=0)  # also save every N steps (0 = only at the end / stop)
    keep: int = Field(default=0, ge=0)  # keep only the newest K step-* directories (0 = all)


class ParallelConfig(StrictModel):
    """Megatron-core's names; used by the pipeline layout planner and the Megatron backend."""

    tensor_model_parallel_size: int = Field(default=1, gt=0)
    pipeline_model_parallel_size: int = Field(default=1, gt=0)
    virtual_pipeline_model_parallel_size: int | None = Field(default=None, gt=0)
    expert_model_parallel_size: int = Field(default=1, gt=0)


class TrainerConfig(StrictModel):
    # which engine trains: ours (this module) or Megatron-core (training.megatron; its own
    # settings in `megatron:`); one YAML drives both
    backend: Literal["ours", "megatron"] = "ours"
    megatron: MegatronOptions = MegatronOptions()
    seed: int = 0
    steps: int = Field(default=20, gt=0)  # used when there are no stages
    threads: int = Field(default=0, ge=0)  # torch intra-op threads; 0 = torch's default
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16 = autocast, fp32 master weights
    grad_clip: float = Field(default=1.0, gt=0)
    record_max_logits: bool = False  # log the largest attention logit (on with QK-clip)
    tensorboard_dir: str | None = None
    loader: LoaderConfig = LoaderConfig()
    model: ModelConfig = ModelConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    stages: list[TrainStageConfig] = []
    checkpoint: CheckpointConfig = CheckpointConfig()
    parallel: ParallelConfig = ParallelConfig()
    # DSA (model.dsa_indexer_*): steps of dense warm-up that train only the indexer
    dsa_warmup_steps: int = Field(default=0, ge=0)
    # start from this checkpoint's weights (a step directory or a directory of step-*; fresh
    # optimizer, step 0) unless checkpoint.dir already holds one to resume; its recorded model
    # config replaces `model`: mid-training and SFT continue the model they are handed (ours only;
    # Megatron has its own --init-from)
    init_from: str | None = None


def load_trainer_config(path: str | Path, overrides: list[str] | None = None) -> TrainerConfig:
    cfg = load_config(TrainerConfig, path, overrides)
    cfg.model.check(f"{path}: model")
    if cfg.dsa_warmup_steps and not (cfg.model.dsa_indexer_n_heads and cfg.model.dsa_indexer_loss_coeff > 0):
        raise ConfigError(
            f"{path}: dsa_warmup_steps: the warm-up trains the DSA indexer by its KL: set "
            "model.dsa_indexer_n_heads and a positive model.dsa_indexer_loss_coeff"
        )
    return cfg


def resolve_stages(cfg: TrainerConfig, shards: str | Path | None) -> list[TrainStageConfig]:
    if shards is not None:
        return [TrainStageConfig(name="main", shards=str(shards), steps=cfg.steps)]
    if not cfg.stages:
        raise ConfigError("stages: empty; pass --shards or list stages in the config")
    return cfg.stages


def stage_at(stages: list[TrainStageConfig], step: int) -> tuple[int, int]:
    """(stage index, first step of that stage) for a global step."""
    start = 0
    for i, s in enumerate(stages):
        if step < start + s.steps:
            return i, start
        start += s.steps
    return len(stages) - 1, start - stages[-1].steps


def with_init_model(cfg: TrainerConfig) -> TrainerConfig:
    """``cfg`` with the model config ``init_from`` recorded (its shape, vocabulary included)."""
    if not cfg.init_from:
        return cfg
    return cfg.model_copy(update={"model": checkpoint_config(checkpoint_step(cfg.init_from))})


def build_model(cfg: TrainerConfig, stages: list[TrainStageConfig]) -> GLMModel:
    manifests = [read_manifest(s.shards) for s in stages]
    for s, m in zip(stages, manifests, strict=True):
        if s.manifest_stage is not None and m.stage != s.manifest_stage:
            raise ConfigError(
                f"stages.{s.name}.manifest_stage: {s.shards} serves stage {m.stage!r}, not {s.manifest_stage!r}"
            )
    vocab = max(m.tokenizer.vocab_size for m in manifests)
    if cfg.model.vocab_size and cfg.model.vocab_size < vocab:
        raise ConfigError(f"model.vocab_size: {cfg.model.vocab_size} < tokenizer vocab {vocab}")
    torch.manual_seed(cfg.seed)
    return GLMModel(cfg.model.model_copy(update={"vocab_size": cfg.model.vocab_size or vocab}))
