"""The orchestrator on a chat task: prompts rendered with the GLM-5 template, replies parsed into
the unified message list, and a weight push that aborts in-flight requests — they are resubmitted
and finish on the new version."""

from __future__ import annotations

import json
import time

from training.policy.codec import Codec
from training.rl.rollout.config import OrchestratorConfig
from training.rl.rollout.orchestrator import Orchestrator
from training.serving.http_json import call


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
    orch = Orchestrator(cfg, tmp_path / "out", codec, log=lambda m: None, wait_for_trainer=True)
    orch.start()
    try:
        assert orch.wait_ready(90)
        assert orch.take_batch(1, 1.0)["groups"] == [] and orch.counters["groups_created"] == 0
        assert orch.trainer_start({})["requeued"] == 0  # the trainer is here: generation starts
        batch = orch.take_batch(1, 90)
        traj = batch["groups"][0]["trajectories"][0]
        gmask = codec.encode("[gMASK]<sop>")
        assert traj["prompt_ids"][: len(gmask)] == gmask
        assert [m["role"] for m in traj["messages"]] == ["user", "assistant"]
        assert traj["messages"][0]["content"].startswith("Which page links to page")
        assert traj["reward"] in (0.0, 1.0) and traj["task"] == "search"

        # a push with abort_inflight while the next groups generate: aborted, resubmitted, then v1
        # in the engine, not merely sent: a request still in transit would not be aborted
        # (on an idle machine a 48-token request can finish between the health poll and the push:
        # push again, with the next version, until one push lands on a request in flight)
        slot = orch.registry.healthy("rollout")[0]
        version = 0
        while orch.counters["aborted_resubmitted"] == 0 and version < 8:
            version += 1
            deadline = time.monotonic() + 120
            while call(f"{slot.endpoint}/health", None)["inflight"] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            res = orch.push_weights({"version": version, "path": str(rl_assets["ckpt2"]), "abort_inflight": True})
            assert res["pushed"] == 1 and not res["failed"]
            later = orch.take_batch(2, 120)
        assert orch.counters["aborted_resubmitted"] >= 1
        # no trajectory mixes weights: what was in flight at a push was aborted and sampled again
        fresh = [t for g in later["groups"] for t in g["trajectories"]]
        assert fresh and all(len(set(t["token_versions"])) == 1 for t in fresh)
        # and what was sampled again after the last push is on its weights (the buffer may still hand out
        # groups that were done before it: take until the resubmitted ones arrive)
        deadline = time.monotonic() + 120
        while not any(set(t["token_versions"]) == {version} for t in fresh) and time.monotonic() < deadline:
            more = [t for g in orch.take_batch(1, 60)["groups"] for t in g["trajectories"]]
            assert all(len(set(t["token_versions"])) == 1 for t in more)
            fresh += more
        assert any(set(t["token_versions"]) == {version} for t in fresh)
    finally:
        summary = orch.shutdown()
    assert summary["ledger"]["open"] == 0


def test_sync_mode_generates_on_demand_on_current_weights(tmp_path):
    """The synchronous baseline: nothing is generated until the trainer asks, exactly the groups
    asked for, and a batch asked for after a push is sampled entirely on the pushed weights."""
    from tests.training.conftest import make_checkpoint
    from training.rl.tasks.backends import toy_tokenizer

    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    ckpt, ckpt2 = make_checkpoint(tmp_path / "c0", tok), make_checkpoint(tmp_path / "c1", tok, seed=1, version=1)
    cfg = OrchestratorConfig.model_validate({
        "checkpoint": str(ckpt), "tokenizer": str(tok), "group_size": 2, "workers": 4, "request_timeout_s": 60,
        "sampling": {"max_tokens": 8}, "rollout": {"replicas": 1, "capacity": 4},
        "heartbeat": {"interval_s": 0.2, "timeout_s": 10},
        "tasks": [{"name": "copy", "kind": "toy", "args": {"kind": "copy", "digits": 2}}]})
    orch = Orchestrator(cfg, tmp_path / "out", Codec.load(tok), mode="sync", log=lambda m: None)
    orch.start()
    try:
        assert orch.wait_ready(120)
        assert orch.counters["groups_created"] == 0  # no demand yet: the servers stay idle
        first = orch.take_batch(2, 120)
        assert len(first["groups"]) == 2 and orch.counters["groups_created"] == 2
        assert all(set(t["token_versions"]) == {0} for g in first["groups"] for t in g["trajectories"])
        q = orch.status()["queues"]
        assert q["in_progress"] == q["ready"] == 0  # nothing generated ahead of the next request
        assert orch.push_weights({"version": 1, "path": str(ckpt2)})["pushed"] == 1
        second = orch.take_batch(1, 120)
        trajs = [t for g in second["groups"] for t in g["trajectories"]]
        assert trajs and all(set(t["token_versions"]) == {1} and t["weight_version"] == 1 for t in trajs)
    finally:
        summary = orch.shutdown()
    assert summary["ledger"]["open"] == 0


def test_failed_push_does_not_relabel_an_untagged_servers_samples(tmp_path):
    """An SGLang-style server (no per-token versions in its replies) whose weight update fails
    keeps sampling with its old weights: its trajectories stay labelled with the old version, so
    the staleness bound sees them as they are. SGLang cannot run here: a small stand-in server
    on 127.0.0.1 speaks its /generate shape and refuses /update_weights_from_disk."""
    from training.rl.tasks.backends import toy_tokenizer
    from training.rl.tasks.service import TaskService
    from training.serving.http_json import HttpError, serve_json

    def refuse(body):
        raise HttpError(500, "weights not loaded")

    sglang = serve_json({"GET /health": lambda b: {"status": "ok"}, "POST /update_weights_from_disk": refuse,
                         "POST /generate": lambda b: {"output_ids": [5, 6], "meta_info": {
                             "finish_reason": {"type": "stop"}, "output_token_logprobs": [[-1.0, 5, None],
                                                                                          [-1.0, 6, None]]}}})
    svc = TaskService("toy", "copy", {"kind": "copy", "digits": 2})
    svc.load()
    tasks = serve_json(svc.routes())
    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    cfg = OrchestratorConfig.model_validate({
        "tokenizer": str(tok), "group_size": 2, "max_ahead_groups": 1, "workers": 2,
        "rollout": {"backend": "sglang", "replicas": 0, "endpoints": [f"http://127.0.0.1:{sglang.server_address[1]}"]},
        "heartbeat": {"interval_s": 0.1, "timeout_s": 10},
        "tasks": [{"name": "copy", "replicas": 0, "endpoints": [f"http://127.0.0.1:{tasks.server_address[1]}"]}]})
    orch = Orchestrator(cfg, tmp_path / "out", Codec.load(tok), log=lambda m: None)
    orch.start()
    try:
        assert orch.wait_ready(60)
        res = orch.push_weights({"version": 1, "path": str(tmp_path / "nowhere")})
        assert res["pushed"] == 0 and len(res["failed"]) == 1 and orch.weight_version == 1
        orch.take_batch(1, 60)  # a group possibly started before the push
        trajs = [t for g in orch.take_batch(1, 60)["groups"] for t in g["trajectories"]]
        assert trajs and all(t["weight_version"] == 0 and set(t["token_versions"]) == {0} for t in trajs)
    finally:
        orch.shutdown()
        for srv in (sglang, tasks):
            srv.shutdown()
            srv.server_close()
