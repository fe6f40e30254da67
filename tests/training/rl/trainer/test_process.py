"""The trainer's pure parts: staleness policy and the loss mask of partial rollouts."""

from __future__ import annotations

import json

import pytest

from training.rl.algo.update import batch_tensors
from training.rl.trainer.process import newest_tokens_only, split_stale
from training.rl.trajectory import Trajectory


def _traj(tid: str, version: int) -> Trajectory:
    return Trajectory(tid, "copy", tid[0], [1], weight_version=version)


def test_staleness_bound_drops_or_keeps_for_importance_correction():
    groups = [[_traj("a0", 5), _traj("a1", 3), _traj("a2", 2)], [_traj("b0", 1), _traj("b1", 4)]]
    kept, dropped = split_stale(groups, version=5, staleness=2, policy="drop", min_group=2)
    assert [[t.id for t in g] for g in kept] == [["a0", "a1"]]
    assert {d["id"]: d["reason"] for d in dropped} == {"a2": "stale", "b0": "stale", "b1": "stale_group_too_small"}
    assert next(d for d in dropped if d["id"] == "a2")["versions_behind"] == 3
    kept, dropped = split_stale(groups, version=5, staleness=2, policy="importance", min_group=2)
    assert [len(g) for g in kept] == [3, 2] and not dropped
    assert [t.id for t in kept[1]] == ["b0", "b1"]


def test_partial_rollout_masks_old_version_tokens_only_when_configured():
    # prompt [7, 8]; turn 1 sampled on v3 (2 tokens) then v4 (1 token); an observation; turn 2 on v4
    t = Trajectory("g1-0", "lookup", "g1", [7, 8], weight_version=3)
    t.add_turn([1, 2, 3], [-0.1, -0.2, -0.3], [3, 3, 4])
    t.add_observation([9, 9])
    t.add_turn([4], [-0.4], [4])
    assert t.token_versions == [3, 3, 4, 4, 4, 4] and t.weight_version == 3  # the oldest sampled version
    t.reward, t.finish_reason = 1.0, "stop"
    same = Trajectory.from_payload(json.loads(json.dumps(t.payload())))  # what /batch carries
    assert same == t and same.tokens == [7, 8, 1, 2, 3, 9, 9, 4]
    with pytest.raises(TypeError):  # the two sides of /batch drifted apart: refused, never half-read
        Trajectory.from_payload({**t.payload(), "versions_behind": 1})
    b = batch_tensors([same])
    assert b["mask"][0].tolist() == [0, 0, 1, 1, 1, 0, 0, 1]
    assert b["rollout_logp"][0].tolist() == pytest.approx([0.0, 0.0, -0.1, -0.2, -0.3, 0.0, 0.0, -0.4])
    newest = newest_tokens_only(same)
    assert newest.loss_mask == [0, 0, 1, 0, 0, 1]  # v3 tokens stay in context, out of the loss
    assert same.loss_mask == [1, 1, 1, 0, 0, 1]


def test_config_refuses_inconsistent_settings():
    from core.config import validate_config
    from core.errors import ConfigError
    from training.rl.trainer.config import RLAsyncConfig

    with pytest.raises(ConfigError, match="temperature"):  # trainer logprobs of another distribution
        validate_config(RLAsyncConfig, {"orchestrator": {"sampling": {"temperature": 0.7}}})
    with pytest.raises(ConfigError, match="min_group_size"):
        validate_config(RLAsyncConfig, {"orchestrator": {"group_size": 2, "min_group_size": 3}})
    with pytest.raises(ConfigError, match="unique"):
        validate_config(RLAsyncConfig, {"orchestrator": {"tasks": [{"name": "a"}, {"name": "a"}]}})


def test_the_agentic_config_names_multi_turn_session_tasks():
    from core.cli import load_cli_config
    from training.rl import CONFIGS
    from training.rl.trainer.config import RLAsyncConfig

    cfg = load_cli_config(RLAsyncConfig, CONFIGS / "rl_agentic_tiny.yaml", None)
    assert {t.kind for t in cfg.orchestrator.tasks} == {"swe", "terminal"} and cfg.tokenizer == "smollm2"
    assert all(t.args["max_turns"] > 1 for t in cfg.orchestrator.tasks)


def test_the_smollm2_agentic_config_is_the_tiny_one_with_a_real_model():
    """The same tasks and loop as rl_agentic_tiny.yaml; the model is SmolLM2 as shipped, its own template."""
    from core.cli import load_cli_config
    from training.policy import PolicySource
    from training.rl import CONFIGS
    from training.rl.trainer.config import RLAsyncConfig

    real = load_cli_config(RLAsyncConfig, CONFIGS / "rl_agentic_smollm2.yaml", None)
    tiny = load_cli_config(RLAsyncConfig, CONFIGS / "rl_agentic_tiny.yaml", None)
    assert isinstance(real.model, PolicySource) and real.model.hf == "smollm2" and not real.tokenizer
    assert real.orchestrator.tasks == tiny.orchestrator.tasks
