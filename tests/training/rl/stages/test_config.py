"""The stage runner's config: errors name the problem; the shipped configs load in the recipe order."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from tests.training.rl.stages.conftest import tiny_stages


def test_config_errors_name_the_problem():
    with pytest.raises(ConfigError, match="must come first"):
        tiny_stages(stages=[{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"plus": 1}},
                              {"name": "sft", "kind": "sft", "steps": 1, "tasks": {"plus": 1}}])  # fmt: skip
    with pytest.raises(ConfigError, match="unknown tasks"):
        tiny_stages(stages=[{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"nope": 1}}])
    with pytest.raises(ConfigError, match="distill_loss is for distill stages"):
        tiny_stages(stages=[{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"plus": 1}, "distill_loss": "reverse_kl"}])
    with pytest.raises(ConfigError, match="distill_loss"):
        tiny_stages(stages=[{"name": "d", "kind": "distill", "steps": 1, "tasks": {"plus": 1}, "distill_loss": "kl"}])
    with pytest.raises(ConfigError, match="one response per prompt"):
        tiny_stages(stages=[{"name": "d", "kind": "distill", "steps": 1, "tasks": {"plus": 1}, "group_size": 4}])


def test_shipped_pipeline_configs_load_in_the_recipe_order():
    from training.rl.stages.runner import load_stages_config

    tiny = load_stages_config("configs/rl_stages_tiny.yaml")
    assert [(s.name, s.kind) for s in tiny.stages] == [("sft", "sft"), ("reasoning_rl", "rl"), ("agentic_rl", "rl"),
                                                       ("general_rl", "rl"), ("distill", "distill")]  # fmt: skip
    # every RL stage registers a teacher, and distillation covers every task type they own
    owned = {t for s in tiny.stages if s.kind == "rl" for t in s.teacher_for}
    assert owned == set(tiny.stages[-1].tasks) and tiny.update.loss.eps_clip_high == 0.28
    demo = load_stages_config("configs/rl_stages_demo.yaml")
    assert [s.kind for s in demo.stages] == ["sft", "rl", "rl", "distill"] and demo.eval.every == 1


def test_the_shipped_smollm2_config_names_the_cached_model():
    from training.policy import PolicySource
    from training.rl.stages.runner import load_stages_config

    cfg = load_stages_config("configs/rl_stages_smollm2.yaml")
    assert isinstance(cfg.model, PolicySource) and cfg.model.hf == "smollm2"
    assert cfg.tasks["arithmetic"].kind == "arithmetic" and [s.kind for s in cfg.stages] == ["rl"]
