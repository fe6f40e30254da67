"""Shared by the stage runner's tests: a tiny config, and one full run (SFT -> RL -> agentic RL ->
distillation) made once for the whole package."""

from __future__ import annotations

import pytest

from core.config import validate_config
from tests.training.glm_tiny import tiny_model
from training.rl.stages.config import StagesConfig
from training.rl.stages.runner import StageRunner


def tiny_stages(**over) -> StagesConfig:
    data = {
        "seed": 3,
        "model": tiny_model(mtp_num_layers=None, num_layers=2).model_dump() | {"vocab_size": 0},
        "optimizer": {"name": "adamw", "lr": 3e-3},
        "rollout": {"group_size": 2, "prompts_per_step": 4, "max_tokens": 3},
        "sft": {"examples": 48, "seq_len": 32, "batch_size": 4},
        "eval": {"prompts": 4, "every": 1},
        "tasks": {"plus": {"kind": "shift", "digits": 1}, "lookup": {"kind": "lookup"}},
        "stages": [
            {"name": "sft", "kind": "sft", "steps": 2, "tasks": {"plus": 1, "lookup": 1}},
            {"name": "rl", "kind": "rl", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
            {"name": "agentic", "kind": "rl", "steps": 1, "tasks": {"lookup": 1}, "teacher_for": ["lookup"]},
            {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1, "lookup": 1}},
        ],
    }
    data.update(over)
    return validate_config(StagesConfig, data)


@pytest.fixture(scope="package")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    return out, StageRunner(tiny_stages(), out, log=lambda _m: None).run()
