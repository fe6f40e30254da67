"""Asynchronous RL of a transformers model (a tiny random Llama made by transformers, the SmolLM2
tokenizer and chat template): the trainer process, a rollout server and an arithmetic task service
run as real processes; pushed weight versions are HF checkpoints the servers load."""

from __future__ import annotations

import json

import pytest

from core.config import validate_config
from training.policy import checkpoint_kind
from training.rl.trainer.config import RLAsyncConfig
from training.rl.trainer.run import run_training


@pytest.mark.slow
def test_async_rl_trains_a_hugging_face_model(tiny_hf, tmp_path):
    cfg = validate_config(RLAsyncConfig, {
        "model": {"hf": str(tiny_hf)},
        "trainer": {"updates": 2, "batch_groups": 2, "push_every": 1, "optimizer": {"name": "adamw", "lr": 1e-3}},
        "orchestrator": {"group_size": 2, "min_group_size": 2, "max_ahead_groups": 4, "workers": 4,
                         "rollout": {"replicas": 1, "capacity": 4, "threads": 1},
                         "sampling": {"temperature": 1.0, "max_tokens": 4},
                         "heartbeat": {"first_wait_s": 120, "interval_s": 0.5, "timeout_s": 10},
                         "tasks": [{"name": "arith", "kind": "arithmetic", "capacity": 4,
                                    "args": {"ops": ["+"], "max_operand": 9}}]},
    }, "test")  # fmt: skip
    out = tmp_path / "run"
    summary = run_training(cfg, out, log=lambda m: None)
    assert summary["ledger"]["ok"] and summary["trainer_exit"] == 0, summary
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2] and all(r["samples"] >= 4 for r in rows)
    latest = sorted((out / "checkpoints").glob("step-*"))[-1]
    assert checkpoint_kind(latest) == ("hf", latest) and json.loads((latest / "trainer.json").read_text())["weight_version"] == 2
