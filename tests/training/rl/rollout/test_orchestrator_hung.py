"""A rollout server that hangs (alive, connections accepted, never answering — SIGSTOP) while
requests are in flight on it: its heartbeats stop, it leaves routing, the trajectories waiting on
it are resubmitted to the other server at once (long before their request timeout), the hung
managed process is killed and relaunched — and given its own first wait while it loads (a
relaunched server used to inherit the dead one's last heartbeat and was killed again while
warming, until the slot was given up) — and every trajectory is accounted once."""

from __future__ import annotations

import os
import signal
import time

from tests.training.conftest import make_checkpoint
from tests.training.rl.rollout.waiting import wait_until
from training.policy.codec import Codec
from training.rl.rollout.config import OrchestratorConfig
from training.rl.rollout.ledger import audit
from training.rl.rollout.orchestrator import Orchestrator
from training.rl.tasks.backends import toy_tokenizer
from training.rl.tasks.service import TaskService
from training.serving.http_json import call, serve_json


def test_hung_rollout_server_leaves_routing_inflight_resubmitted_and_restarted(tmp_path):
    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    ckpt = make_checkpoint(tmp_path / "ckpt", tok)
    # ignore_eos + 48 tokens: every rollout takes many decoding rounds, so one is in flight to stop
    svc = TaskService("toy", "copy", {"kind": "copy", "digits": 2, "ignore_eos": True, "max_tokens": 48})
    svc.load()
    tasks = serve_json(svc.routes())
    cfg = OrchestratorConfig.model_validate({
        "checkpoint": str(ckpt), "tokenizer": str(tok), "group_size": 2, "max_ahead_groups": 4, "workers": 4,
        "request_timeout_s": 300,  # only the heartbeat can free a trajectory stuck on the hung server in time
        "rollout": {"replicas": 2, "capacity": 2},
        "heartbeat": {"first_wait_s": 120, "interval_s": 0.2, "timeout_s": 2, "restart": True},
        "tasks": [{"name": "copy", "replicas": 0, "endpoints": [f"http://127.0.0.1:{tasks.server_address[1]}"]}]})
    orch = Orchestrator(cfg, tmp_path / "out", Codec.load(tok), log=lambda m: None)
    orch.start()
    hung = None
    try:
        assert orch.wait_ready(120) and wait_until(lambda: len(orch.registry.healthy("rollout")) == 2, 120, "2 servers", poll_s=0.02)
        slot = orch.registry.slots["rollout-0"]
        wait_until(lambda: call(f"{slot.endpoint}/health", None)["inflight"] > 0, 60, "a request in flight on rollout-0", poll_s=0.02)
        hung = slot.proc.pid
        os.kill(hung, signal.SIGSTOP)
        t0 = time.monotonic()
        wait_until(lambda: orch.counters["resubmitted_unhealthy"] >= 1, 60, "in-flight trajectories resubmitted", poll_s=0.02)
        assert time.monotonic() - t0 < 60  # the heartbeat freed them, not the 300 s request timeout
        assert all(s.key != "rollout-0" for s in orch.registry.healthy("rollout"))  # out of routing
        # the hung process is killed and a fresh one takes the slot
        wait_until(lambda: slot.proc.pid != hung and slot.state == "healthy", 120, "rollout-0 relaunched", poll_s=0.02)
        events = [e["event"] for e in orch.registry.events if e["key"] == "rollout-0"]
        assert events.count("launched") == 2 and "unhealthy" in events
        batch = orch.take_batch(3, 120)
        trajs = [t for g in batch["groups"] for t in g["trajectories"]]
        assert len(batch["groups"]) == 3 and all(len(t["output_ids"]) == 48 for t in trajs)
        assert len({t["id"] for t in trajs}) == len(trajs)
        orch.commit({"trained": [{"id": t["id"]} for t in trajs], "groups": [g["group"] for g in batch["groups"]]})
    finally:
        if hung is not None:
            try:
                os.kill(hung, signal.SIGKILL)  # if the registry has not already
            except ProcessLookupError:
                pass
        summary = orch.shutdown()
        tasks.shutdown()
        tasks.server_close()
    assert summary["ledger"]["open"] == 0
    report = audit(tmp_path / "out")
    assert report["ok"] and report["trained"] == 6, report
