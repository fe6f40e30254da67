"""Configuration of asynchronous RL (``python -m training.rl train --config configs/rl_async_tiny.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.config import StrictModel
from training.model.config import ModelConfig
from training.optim.optimizers import OptimizerConfig
from training.policy import PolicySource
from training.rl.algo.update import UpdateConfig
from training.rl.rollout.config import OrchestratorConfig


class AsyncTrainerConfig(StrictModel):
    # async: rollout servers keep generating while the trainer trains; sync: the baseline —
    # generate exactly one batch on the current weights, then train, then generate again
    mode: Literal["async", "sync"] = "async"
    updates: int = Field(default=20, gt=0)
    batch_groups: int = Field(default=4, gt=0)  # the buffer's release threshold (groups per update)
    push_every: int = Field(default=1, gt=0)  # K: push weights (a new version) every K updates
    reset_optimizer: bool = True  # fresh optimizer state after each push (GLM-5)
    staleness: int = Field(default=2, ge=0)  # S: max versions a sample may lag the trained weights
    stale_policy: Literal["drop", "importance"] = "drop"  # importance: keep, truncated-IS corrected
    partial_rollout: Literal["finish", "abort"] = "finish"  # in-flight requests at a push
    mask_old_tokens: bool = False  # finish: train only on tokens of a trajectory's newest version
    batch_timeout_s: float = Field(default=300.0, gt=0)  # waiting longer than this for a batch is an error
    threads: int = Field(default=1, ge=0)
    keep_checkpoints: int = Field(default=3, gt=1)
    max_restarts: int = Field(default=2, ge=0)  # trainer process restarts from its checkpoint
    optimizer: OptimizerConfig = OptimizerConfig(name="adamw", lr=1e-3, weight_decay=0.0)
    update: UpdateConfig = UpdateConfig()  # loss, epochs, minibatches, grad clip, temperature


class RLAsyncConfig(StrictModel):
    seed: int = 0
    tokenizer: str | None = None  # tokenizer.json, or smollm2 (SmolLM2's, user cache); None: the toy tasks' (or the policy's own)
    init_checkpoint: str | None = None  # weights (and so the model shape) to start from; None: random init
    # our model's shape (from scratch or init_checkpoint), or existing weights with their own tokenizer
    # and chat template: {hf: PATH} (any transformers causal LM) / {checkpoint: PATH} (ours or HF)
    model: ModelConfig | PolicySource = ModelConfig()
    trainer: AsyncTrainerConfig = AsyncTrainerConfig()
    orchestrator: OrchestratorConfig = OrchestratorConfig()

    @model_validator(mode="after")
    def _same_temperature(self) -> RLAsyncConfig:
        # the trainer's logprobs must be of the distribution the servers sampled from
        t_sample, t_train = self.orchestrator.sampling.temperature, self.trainer.update.temperature
        if t_sample != t_train:
            raise ValueError(f"orchestrator.sampling.temperature ({t_sample}) != trainer.update.temperature ({t_train})")
        return self
