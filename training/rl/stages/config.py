"""Config of the stage runner (``training.rl.stages.runner``), loaded from YAML
(``configs/rl_stages_*.yaml``).

The stages are data: the model, the optimizer, rollout and update settings, the tasks, and an
ordered list of stages, e.g. SFT -> reasoning RL -> agentic RL -> general RL -> distillation.
``model`` is either our model's shape (made from scratch, for the toy tasks) or existing weights:
``{hf: PATH}`` (any transformers causal LM) or ``{checkpoint: PATH}`` (ours or HF, e.g. what
``python -m training.sft`` wrote), with text tasks in the policy's own chat template.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.config import StrictModel
from training.model.config import ModelConfig
from training.optim.optimizers import OptimizerConfig
from training.optim.schedules import ScheduleConfig
from training.policy import PolicySource
from training.rl.algo.update import UpdateConfig
from training.rl.tasks.build import TaskConfig, is_text


class StageRolloutConfig(StrictModel):
    group_size: int = Field(default=8, gt=0)  # G samples per prompt (distillation uses 1)
    prompts_per_step: int = Field(default=16, gt=0)
    temperature: float = Field(default=1.0, gt=0)  # the update recomputes logprobs at this temperature
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=8, gt=0)  # per model turn


class EvalConfig(StrictModel):
    prompts: int = Field(default=64, gt=0)  # a fixed held-out set per task
    temperature: float = Field(default=0.0, ge=0)  # 0 = greedy
    every: int = Field(default=1, gt=0)  # evaluate every N steps of a stage (and at its end)
    seed: int = 1234


class SFTToyConfig(StrictModel):
    """SFT stages on the toy tasks' reference answers, trained by ``training.trainer``."""

    examples: int = Field(default=512, gt=0)  # reference samples, split over the stage's tasks by weight
    seq_len: int = Field(default=64, gt=1)
    batch_size: int = Field(default=8, gt=0)
    schedule: ScheduleConfig = ScheduleConfig(kind="constant", warmup_steps=0)


class StageSpec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["sft", "rl", "distill"]
    steps: int = Field(gt=0)
    tasks: dict[str, float]  # task -> share of the stage's prompts (or SFT examples)
    lr: float | None = Field(default=None, gt=0)  # default: optimizer.lr
    # register this stage's final checkpoint as the teacher of these task types
    teacher_for: list[str] = []
    # distill: task type -> the stage whose registered teacher to use (default: the registry)
    teachers: dict[str, str] = {}
    group_size: int | None = Field(default=None, gt=0)  # default rollout.group_size (distill: 1)
    # distill: the sampled tokens' teacher-student log-ratio as a per-token advantage (slime's), or the
    # exact KL between the whole next-token distributions at the student's states (training.rl.algo.distill)
    distill_loss: Literal["sampled_token", "reverse_kl", "forward_kl"] = "sampled_token"

    @model_validator(mode="after")
    def _check(self) -> StageSpec:
        if not self.tasks or any(w <= 0 for w in self.tasks.values()):
            raise ValueError(f"stage {self.name}: tasks needs at least one task with a positive weight")
        unknown = set(self.teachers) - set(self.tasks)
        if unknown:
            raise ValueError(f"teachers: unknown tasks {sorted(unknown)}")
        if self.distill_loss != "sampled_token" and self.kind != "distill":
            raise ValueError(f"stage {self.name}: distill_loss is for distill stages")
        return self


class StagesConfig(StrictModel):
    seed: int = 0
    threads: int = Field(default=1, ge=0)  # torch intra-op threads; 0 = torch's default
    # our model from scratch (its shape), or existing weights: {hf: PATH} / {checkpoint: PATH}
    model: ModelConfig | PolicySource = ModelConfig()
    optimizer: OptimizerConfig = OptimizerConfig(name="adamw", lr=3e-3)
    schedule: ScheduleConfig = ScheduleConfig(kind="constant", warmup_steps=0)  # per RL stage
    rollout: StageRolloutConfig = StageRolloutConfig()
    update: UpdateConfig = UpdateConfig()
    sft: SFTToyConfig = SFTToyConfig()
    eval: EvalConfig = EvalConfig()
    tasks: dict[str, TaskConfig]
    stages: list[StageSpec]
    # task type -> a checkpoint (ours or HF) registered as its teacher before the first stage,
    # e.g. the SFT checkpoint the run starts from; a stage's teacher_for replaces it
    teachers: dict[str, str] = {}

    @model_validator(mode="after")
    def _check(self) -> StagesConfig:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("stages: names must be unique")
        for i, s in enumerate(self.stages):
            unknown = (set(s.tasks) | set(s.teacher_for) | set(s.teachers)) - set(self.tasks)
            if unknown:
                raise ValueError(f"stage {s.name}: unknown tasks {sorted(unknown)}")
            if s.kind == "sft" and i > 0:
                raise ValueError(f"stage {s.name}: an sft stage must come first (it starts the model)")
            if s.kind == "sft" and (isinstance(self.model, PolicySource) or any(is_text(self.tasks[t]) for t in s.tasks)):
                raise ValueError(f"stage {s.name}: sft stages train a model from scratch on toy tasks; "
                                 "fine-tune existing weights with `python -m training.sft` and start from its checkpoint")
            for task, src in s.teachers.items():
                if src not in names[:i]:
                    raise ValueError(f"stage {s.name}: teacher of {task} must be an earlier stage, got {src!r}")
            if s.kind == "distill" and s.group_size not in (None, 1):
                raise ValueError(f"stage {s.name}: on-policy distillation samples one response per prompt")
        unknown = set(self.teachers) - set(self.tasks)
        if unknown:
            raise ValueError(f"teachers: unknown tasks {sorted(unknown)}")
        return self
