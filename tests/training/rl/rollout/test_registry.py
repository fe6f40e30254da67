"""Heartbeat lifecycle of the registry against an endpoint where nothing listens: silence inside
``first_wait_s`` does not count (a cold server loading a model is not killed), after it the
server leaves routing and ``on_unhealthy`` is called once."""

from __future__ import annotations

import socket
import time

from training.rl.rollout.config import HeartbeatConfig
from training.rl.rollout.registry import Registry


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


def test_a_relaunched_server_gets_its_own_first_wait(tmp_path):
    """A managed server that was healthy, died and was relaunched is cold again: its load must not
    be cut short by the dead process's last heartbeat (it was, and the slot was relaunched over and
    over until max_restarts gave it up)."""
    import sys

    hb = HeartbeatConfig(first_wait_s=600.0, interval_s=0.05, timeout_s=0.3, restart=True, max_restarts=5)
    reg = Registry(hb, tmp_path, log=lambda m: None)
    # a process that stays up and never answers: a server still loading its model
    slot = reg.add_managed("rollout-0", "rollout", None, 1, lambda: [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        slot.endpoint, slot.state, slot.last_ok = _dead_endpoint(), "healthy", time.monotonic()  # it was serving
        reg.start()
        slot.proc.kill()  # it dies: unhealthy, relaunched
        deadline = time.monotonic() + 60
        while sum(e["event"] == "launched" for e in reg.events) < 2:
            assert time.monotonic() < deadline, reg.events
            time.sleep(0.05)
        time.sleep(1.5)  # five heartbeat timeouts of silence from the new, loading process
        assert [e["event"] for e in reg.events].count("launched") == 2, reg.events
        assert slot.state == "starting" and slot.restarts == 1
    finally:
        reg.stop()
