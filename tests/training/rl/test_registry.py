"""Heartbeat lifecycle of the registry against an endpoint where nothing listens: silence inside
``first_wait_s`` does not count (a cold server loading a model is not killed), after it the
server leaves routing and ``on_unhealthy`` is called once."""

from __future__ import annotations

import socket
import time

from training.rl.orchestrator_config import HeartbeatConfig
from training.rl.registry import Registry


def _dead_endpoint() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: connections are refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_first_wait_grace_then_timeout(tmp_path):
    dead = _dead_endpoint()
    gone: list[str] = []
    regs = []
    for first_wait in (600.0, 0.0):
        hb = HeartbeatConfig(first_wait_s=first_wait, interval_s=0.05, timeout_s=0.3, restart=False)
        reg = Registry(hb, tmp_path, log=lambda m: None, on_unhealthy=lambda s: gone.append(s.key))
        reg.register(f"wait-{first_wait:g}", "rollout", None, dead, 1)
        reg.start()
        regs.append(reg)
    cold, late = regs
    try:
        deadline = time.monotonic() + 120  # polling: the heartbeat thread may be starved on a loaded box
        while late.slots["wait-0"].state != "unhealthy":
            assert time.monotonic() < deadline, late.view()
            time.sleep(0.05)
        # the same silence, for at least as long, inside the first wait: still starting, never routed
        assert cold.slots["wait-600"].state == "starting" and cold.acquire("rollout") is None
        assert gone == ["wait-0"] and late.acquire("rollout") is None
    finally:
        for reg in regs:
            reg.stop()
