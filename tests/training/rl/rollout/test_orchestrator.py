"""`python -m training.rl orchestrator` as a process, with services that register themselves:
warm-up grace, per-task ratios and rate limits, the trainer protocol, heartbeat timeouts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import yaml

from tests.training.conftest import make_checkpoint, start_module, stop, wait_port_file
from tests.training.rl.rollout.waiting import wait_until
from training.rl.rollout.ledger import audit
from training.rl.tasks.backends import toy_tokenizer
from training.serving.http_json import call


def _status(url: str) -> dict:
    return call(f"{url}/status", None)




def test_registration_warmup_ratios_rate_limit_and_heartbeat_timeout(tmp_path):
    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    ckpt = make_checkpoint(tmp_path / "ckpt", tok)
    cfg = {"tokenizer": str(tok), "group_size": 2, "max_ahead_groups": 8, "workers": 4, "request_timeout_s": 10,
           "rollout": {"replicas": 0}, "sampling": {"max_tokens": 4},
           # generous: a loaded machine may starve a process for a second or two, never for 4 s
           "heartbeat": {"first_wait_s": 20, "interval_s": 0.2, "timeout_s": 4},
           "tasks": [{"name": "copy", "kind": "toy", "replicas": 0, "ratio": 3},
                     {"name": "lookup", "kind": "toy", "replicas": 0, "ratio": 1, "rate_limit_per_s": 0.5}]}
    (tmp_path / "orch.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp_path / "orch"
    orch = subprocess.Popen([sys.executable, "-m", "training.rl", "orchestrator", "--config", str(tmp_path / "orch.yaml"),
                             "--out", str(out), "--port-file", str(tmp_path / "orch.port")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs = []
    try:
        url = f"http://127.0.0.1:{wait_port_file(orch, tmp_path / 'orch.port')}"
        # a cold service: warming for 5 s, longer than the heartbeat timeout, inside the first wait
        for name, args, warm in (("copy", {"kind": "copy", "digits": 2}, 5.0), ("lookup", {"kind": "lookup"}, 0.0)):
            p, _ = start_module(["training.rl", "task-service", "--kind", "toy", "--name", name, "--args",
                                 json.dumps(args), "--register", url, "--warmup-s", str(warm)], tmp_path / f"{name}.port")
            procs.append(p)
        srv, _ = start_module(["training.rl", "serve", "--checkpoint", str(ckpt), "--register", url], tmp_path / "s.port")
        procs.append(srv)
        t0 = time.monotonic()
        wait_until(lambda: all(s["state"] == "healthy" for s in _status(url)["servers"]) and len(_status(url)["servers"]) == 3,
              timeout_s=120, what="three healthy servers")
        events = [e["event"] for e in _status(url)["events"]]
        assert "warming" in events and "unhealthy" not in events, events

        # groups fill the buffer at a 3:1 ratio, lookup no faster than its rate limit
        st = wait_until(lambda: (s := _status(url))["queues"]["ready"] >= 6 and s, timeout_s=120, what="ready groups")
        by_task = st["groups_by_task"]
        elapsed = time.monotonic() - t0
        assert by_task["copy"] >= 2 * by_task.get("lookup", 0) and by_task.get("lookup", 0) <= 1 + 0.5 * elapsed + 1

        batch = call(f"{url}/batch", {"groups": 2, "timeout_s": 30})
        trajs = [t for g in batch["groups"] for t in g["trajectories"]]
        assert len(batch["groups"]) == 2 and len(trajs) == 4
        for t in trajs:
            assert t["task"] in ("copy", "lookup") and t["weight_version"] == 0
            assert len(t["output_ids"]) == len(t["loss_mask"]) == len(t["logprobs"]) == len(t["token_versions"])
            assert t["messages"][0]["role"] == "user" and t["messages"][1]["role"] == "assistant"
            assert 0.0 <= t["reward"] <= 1.0
        done = call(f"{url}/commit", {"trained": [{"id": t["id"]} for t in trajs],
                                      "groups": [g["group"] for g in batch["groups"]]})
        assert done["committed"] == 4

        # an external service that stops answering leaves routing (and is not restarted: not ours)
        procs[1].kill()
        wait_until(lambda: any(s["task"] == "lookup" and s["state"] == "unhealthy" for s in _status(url)["servers"]),
              timeout_s=60, what="lookup unhealthy")
    finally:
        for p in procs:
            stop(p)
        orch.send_signal(signal.SIGINT)
        orch.wait(timeout=30)
    report = audit(out)
    assert report["ok"] and report["trained"] == 4 and report["by_reason"].get("orchestrator_stopped", 0) >= 1
    assert json.loads((out / "summary.json").read_text())["ledger"]["open"] == 0


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"  # a zombie waiting for whoever adopted it has exited


def test_managed_servers_exit_when_the_orchestrator_is_killed(tmp_path):
    """An orchestrator killed with SIGKILL cannot stop its children: they notice and exit."""
    import os

    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    cfg = {"tokenizer": str(tok), "rollout": {"replicas": 0}, "heartbeat": {"interval_s": 0.2, "timeout_s": 10},
           "tasks": [{"name": "copy", "kind": "toy", "args": {"kind": "copy", "digits": 2}}]}
    (tmp_path / "orch.yaml").write_text(yaml.safe_dump(cfg))
    orch = subprocess.Popen([sys.executable, "-m", "training.rl", "orchestrator", "--config", str(tmp_path / "orch.yaml"),
                             "--out", str(tmp_path / "out"), "--port-file", str(tmp_path / "orch.port")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        url = f"http://127.0.0.1:{wait_port_file(orch, tmp_path / 'orch.port')}"
        pid = wait_until(lambda: next((s["pid"] for s in _status(url)["servers"] if s["state"] == "healthy"), None),
                    timeout_s=120, what="a healthy managed task service")
        orch.kill()
        orch.wait(timeout=30)
        wait_until(lambda: not _alive(pid), timeout_s=60, what="the orphaned task service to exit")
    finally:
        stop(orch)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
