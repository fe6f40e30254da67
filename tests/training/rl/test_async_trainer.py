"""The trainer's pure parts: staleness policy and the loss mask of partial rollouts."""

from __future__ import annotations

from training.rl.async_trainer import split_stale, to_trajectory


def _traj(tid: str, version: int) -> dict:
    return {"id": tid, "weight_version": version}


def test_staleness_bound_drops_or_keeps_for_importance_correction():
    groups = [{"trajectories": [_traj("a0", 5), _traj("a1", 3), _traj("a2", 2)]},
              {"trajectories": [_traj("b0", 1), _traj("b1", 4)]}]
    kept, dropped = split_stale(groups, version=5, staleness=2, policy="drop", min_group=2)
    assert [[t["id"] for t in g] for g in kept] == [["a0", "a1"]]
    assert {d["id"]: d["reason"] for d in dropped} == {"a2": "stale", "b0": "stale", "b1": "stale_group_too_small"}
    assert next(d for d in dropped if d["id"] == "a2")["versions_behind"] == 3
    kept, dropped = split_stale(groups, version=5, staleness=2, policy="importance", min_group=2)
    assert [len(g) for g in kept] == [3, 2] and not dropped
    assert [t["versions_behind"] for t in kept[1]] == [4, 1]


def test_partial_rollout_masks_old_version_tokens_only_when_configured():
    # prompt [7, 8]; turn 1 sampled on v3 (2 tokens) then v4 (1 token); an observation; turn 2 on v4
    t = {"task": "lookup", "prompt_ids": [7, 8], "output_ids": [1, 2, 3, 9, 9, 4],
         "loss_mask": [1, 1, 1, 0, 0, 1], "logprobs": [-0.1, -0.2, -0.3, 0.0, 0.0, -0.4],
         "token_versions": [3, 3, 4, 4, 4, 4], "reward": 1.0, "finish_reason": "stop", "weight_version": 3}
    full = to_trajectory(t, 0, mask_old=False)
    assert full.tokens == [7, 8, 1, 2, 3, 9, 9, 4] and full.prompt_len == 2
    assert full.loss_mask == [0, 0, 1, 1, 1, 0, 0, 1]
    assert full.logprobs == [0.0, 0.0, -0.1, -0.2, -0.3, 0.0, 0.0, -0.4]
    newest = to_trajectory(t, 0, mask_old=True)
    assert newest.loss_mask == [0, 0, 0, 0, 1, 0, 0, 1]  # v3 tokens stay in context, out of the loss


def test_config_refuses_inconsistent_settings():
    import pytest

    from core.config import validate_config
    from core.errors import ConfigError
    from training.rl.async_config import RLAsyncConfig

    with pytest.raises(ConfigError, match="temperature"):  # trainer logprobs of another distribution
        validate_config(RLAsyncConfig, {"orchestrator": {"sampling": {"temperature": 0.7}}})
    with pytest.raises(ConfigError, match="min_group_size"):
        validate_config(RLAsyncConfig, {"orchestrator": {"group_size": 2, "min_group_size": 3}})
    with pytest.raises(ConfigError, match="unique"):
        validate_config(RLAsyncConfig, {"orchestrator": {"tasks": [{"name": "a"}, {"name": "a"}]}})
