"""End-to-end asynchronous RL runs: real rollout-server, task-service and trainer processes on
127.0.0.1, a tiny model, bounded runs. One run injects every fault the issue names at once."""

from __future__ import annotations

import json
from pathlib import Path

from core.cli import load_cli_config
from training.rl.trainer.config import RLAsyncConfig
from training.rl.trainer.run import run_training

ROOT = Path(__file__).resolve().parents[4]
TINY = [  # smaller and shorter than the shipped config: CI time
    "model.num_layers=2", "model.hidden_size=32", "model.ffn_hidden_size=64", "model.q_lora_rank=16",
    "model.kv_lora_rank=16", "model.qk_head_dim=8", "model.qk_pos_emb_head_dim=8", "model.v_head_dim=8",
    "model.moe_ffn_hidden_size=16", "model.moe_shared_expert_intermediate_size=16",
    "orchestrator.group_size=3", "trainer.batch_groups=2", "orchestrator.heartbeat.interval_s=0.3",
    "orchestrator.heartbeat.timeout_s=3", "trainer.push_every=1",
]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _config(*overrides: str) -> RLAsyncConfig:
    return load_cli_config(RLAsyncConfig, ROOT / "configs/rl_async_tiny.yaml", [*TINY, *overrides])


def test_faults_every_trajectory_trained_once_or_dropped_with_reason(tmp_path):
    cfg = _config(
        "trainer.updates=5", "trainer.staleness=1", "orchestrator.max_attempts=4",
        "orchestrator.request_timeout_s=2",
        "orchestrator.faults.kill_task_service_after_groups=[3]",
        "orchestrator.faults.kill_rollout_server_after_groups=[6]",
        "orchestrator.faults.task_slow_prob=0.05", "orchestrator.faults.task_slow_s=3",
        "orchestrator.faults.task_garble_prob=0.1", "orchestrator.faults.rollout_garble_prob=0.05",
        "orchestrator.faults.rollout_slow_prob=0.05", "orchestrator.faults.rollout_slow_s=3",
        "orchestrator.faults.trainer_crash_after_updates=[2]",
    )
    out = tmp_path / "run"
    summary = run_training(cfg, out, log=lambda m: None)

    led = summary["ledger"]
    assert led["ok"], led  # none lost, none duplicated, every drop has a reason
    rows = _rows(out / "ledger.jsonl")
    assert len(rows) == len({r["id"] for r in rows}) == led["issued"] > 0
    assert {r["status"] for r in rows} <= {"trained", "dropped"} and all(r["task"] in ("copy", "lookup") for r in rows)
    assert all(r["reason"] for r in rows if r["status"] == "dropped")
    trained = [r for r in rows if r["status"] == "trained"]
    assert len(trained) >= 5 * 2 * 2  # 5 updates x 2 groups x >= min_group_size

    faults = summary["faults"]
    assert faults.get("kill_task") == 1 and faults.get("kill_rollout") == 1 and faults.get("trainer_crash") == 1
    assert faults.get("task_garbled", 0) + faults.get("rollout_garbled", 0) >= 1
    assert faults.get("task_slow", 0) + faults.get("rollout_slow", 0) >= 1
    assert summary["trainer_restarts"] == 1 and summary["trainer_exit"] == 0
    events = summary["events"]
    for role in ("task-copy-0", "rollout-"):
        killed = [e for e in events if e["key"].startswith(role) and e["event"] == "killed"]
        relaunched = [e for e in events if e["key"].startswith(role) and e["event"] == "launched"]
        if killed:
            assert len(relaunched) >= 2  # the killed process was started again
    assert sum(1 for e in events if e["event"] == "killed") == 2
    counters = summary["counters"]
    assert counters.get("groups_redelivered", 0) >= 1  # the crashed trainer's uncommitted groups came back
    assert any(k.startswith("failed:") for k in counters)
    assert any(k.startswith("failed:") and k.endswith(":garbled") for k in counters)
    assert any(k.startswith("failed:") and k.endswith(":timeout") for k in counters)  # slow past request_timeout_s

    metrics = _rows(out / "metrics.jsonl")
    assert [m["update"] for m in metrics] == [1, 2, 3, 4, 5]  # the crash's lost update is not left behind
    for m in metrics:
        assert {"reward", "weight_version", "stale_dropped", "idle_ratio", "samples_per_s",
                "versions_behind_mean"} <= set(m)
        assert 0 <= m["idle_ratio"] <= 1 and m["versions_behind_max"] <= 1  # staleness bound S=1
        assert 0 < m["distinct_frac"] <= 1
    assert [m["weight_version"] for m in metrics] == [0, 1, 2, 3, 4]  # trained on v, pushes v+1



def test_init_checkpoint_of_a_trainer_run_that_recorded_no_vocabulary(rl_assets, tmp_path):
    """training.trainer (SFT, pretraining) records the YAML's vocab_size 0 ("from the shard manifest"):
    the RL run takes the size from the weights and starts from exactly them."""
    import json

    import torch

    from core.config import validate_config
    from training.checkpoint import checkpoint_config
    from training.rl.trainer.config import RLAsyncConfig
    from training.rl.trainer.run import initial_checkpoint

    src = rl_assets["ckpt"]
    sft = tmp_path / "sft"
    import shutil

    shutil.copytree(src, sft)
    meta = json.loads((sft / "trainer.json").read_text())
    vocab = meta["config"]["model"]["vocab_size"]
    meta["config"]["model"]["vocab_size"] = 0
    (sft / "trainer.json").write_text(json.dumps(meta))
    out = tmp_path / "run"
    out.mkdir()
    (out / "tokenizer.json").write_bytes(rl_assets["tokenizer"].read_bytes())
    cfg = validate_config(RLAsyncConfig, {"init_checkpoint": str(sft), "tokenizer": str(rl_assets["tokenizer"])})
    step0 = initial_checkpoint(cfg, out, vocab)
    assert checkpoint_config(step0).vocab_size == vocab == cfg.model.vocab_size
    from safetensors.torch import load_file

    a, b = load_file(str(sft / "model.safetensors")), load_file(str(step0 / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
