"""The orchestrator on a chat task: prompts rendered with the GLM-5 template, replies parsed into
the unified message list, and a weight push that aborts in-flight requests — they are resubmitted
and finish on the new version."""

from __future__ import annotations

import json
import time

from training.rl.orchestrator import Orchestrator
from training.rl.orchestrator_config import OrchestratorConfig
from training.serving.codec import Codec


def test_chat_task_groups_and_abort_on_push(rl_assets, tmp_path):
    tasks = tmp_path / "search.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Which page links to page {i}?",
                                         "answer": f"page {i + 1}"}) + "\n" for i in range(3)))
    cfg = OrchestratorConfig.model_validate({
        "checkpoint": str(rl_assets["ckpt"]), "group_size": 2, "max_ahead_groups": 2, "workers": 4,
        "request_timeout_s": 60, "sampling": {"max_tokens": 48},
        "rollout": {"replicas": 1, "capacity": 4}, "heartbeat": {"interval_s": 0.2, "timeout_s": 5},
        "tasks": [{"name": "search", "kind": "search", "args": {"tasks": str(tasks)}}]})
    codec = Codec.load(rl_assets["tokenizer"])
    orch = Orchestrator(cfg, tmp_path / "out", codec, log=lambda m: None)
    orch.start()
    try:
        assert orch.wait_ready(90)
        batch = orch.take_batch(1, 90)
        traj = batch["groups"][0]["trajectories"][0]
        gmask = codec.encode("[gMASK]<sop>")
        assert traj["prompt_ids"][: len(gmask)] == gmask
        assert [m["role"] for m in traj["messages"]] == ["user", "assistant"]
        assert traj["messages"][0]["content"].startswith("Which page links to page")
        assert traj["reward"] in (0.0, 1.0) and traj["task"] == "search"

        # a push with abort_inflight while the next groups generate: aborted, resubmitted, then v1
        slot = orch.registry.healthy("rollout")[0]
        deadline = time.monotonic() + 30
        while slot.inflight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        res = orch.push_weights({"version": 1, "path": str(rl_assets["ckpt2"]), "abort_inflight": True})
        assert res["pushed"] == 1 and not res["failed"]
        later = orch.take_batch(2, 120)
        assert orch.counters["aborted_resubmitted"] >= 1
        fresh = [t for g in later["groups"] for t in g["trajectories"]]
        assert fresh and all(set(t["token_versions"]) == {1} for t in fresh[-2:])
    finally:
        summary = orch.shutdown()
    assert summary["ledger"]["open"] == 0
