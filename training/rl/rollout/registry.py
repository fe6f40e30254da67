"""Server registry: registration, heartbeats, routing and the lifecycle of managed processes.

One registry holds both kinds of servers the orchestrator routes to — rollout servers and task
services. A *slot* is either managed (the registry launched the process and restarts it) or
external (it registered over HTTP or was listed in the config). Heartbeats poll ``GET /health``:

* during ``first_wait_s`` after launch or registration, failures do not count — a cold server
  that is still loading a model is never killed for being slow to start;
* a server answering ``{"status": "warming"}`` is alive but not routable;
* after it was healthy, ``timeout_s`` without a successful heartbeat (or a managed process that
  exited) makes it unhealthy: it leaves routing at once, ``on_unhealthy`` resubmits its in-flight
  work, and a managed slot is killed and relaunched (up to ``max_restarts``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from training.rl.rollout.config import HeartbeatConfig
from training.serving.http_json import CallFailure, call


@dataclass
class Slot:
    key: str
    role: str  # rollout | task
    task: str | None
    capacity: int
    managed: bool
    endpoint: str | None = None
    state: str = "starting"  # starting | warming | healthy | unhealthy | stopped
    since: float = field(default_factory=time.monotonic)  # launch/registration time (first-wait clock)
    last_ok: float = 0.0
    inflight: int = 0
    restarts: int = 0
    proc: subprocess.Popen | None = None
    command: Callable[[], list[str]] | None = None  # re-evaluated at each (re)launch
    info: dict = field(default_factory=dict)

    def view(self) -> dict:
        return {"key": self.key, "role": self.role, "task": self.task, "endpoint": self.endpoint,
                "state": self.state, "inflight": self.inflight, "capacity": self.capacity,
                "managed": self.managed, "restarts": self.restarts, "pid": self.proc.pid if self.proc else None}


class Registry:
    def __init__(self, hb: HeartbeatConfig, log_dir: Path, log: Callable[[str], None] = print,
                 on_unhealthy: Callable[[Slot], None] | None = None):
        self.hb = hb
        self.log_dir = log_dir
        self.log = log
        self.on_unhealthy = on_unhealthy or (lambda slot: None)
        self.slots: dict[str, Slot] = {}
        self.lock = threading.Condition()
        self.events: list[dict] = []  # lifecycle history for the run summary
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeats, daemon=True, name="heartbeats")

    # -- membership -------------------------------------------------------------------------------
    def add_managed(self, key: str, role: str, task: str | None, capacity: int,
                    command: Callable[[], list[str]]) -> Slot:
        slot = Slot(key, role, task, capacity, managed=True, command=command)
        with self.lock:
            self.slots[key] = slot
        self._launch(slot)
        return slot

    def register(self, key: str | None, role: str, task: str | None, endpoint: str, capacity: int,
                 info: dict | None = None) -> Slot:
        """A server announces itself: a managed slot learns its endpoint, anything else is added."""
        with self.lock:
            slot = self.slots.get(key or endpoint)
            if slot is None:
                slot = Slot(key or endpoint, role, task, capacity, managed=False)
                self.slots[slot.key] = slot
            slot.endpoint, slot.capacity, slot.info = endpoint.rstrip("/"), capacity, info or {}
            # a (re-)registration starts a fresh first wait: the old process's last heartbeat does not count
            slot.state, slot.since, slot.last_ok = "starting", time.monotonic(), 0.0
            self._event(slot, "registered")
            self.lock.notify_all()
        return slot

    def _launch(self, slot: Slot) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_fh = open(self.log_dir / f"{slot.key}.log", "a", encoding="utf-8")
        # own process group: a kill reaches the server and anything it started
        slot.proc = subprocess.Popen(slot.command(), stdout=log_fh, stderr=subprocess.STDOUT,
                                     start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log_fh.close()
        # last_ok goes too: the new process gets its own first wait (with the killed process's last
        # heartbeat kept, a relaunched server still loading its model was declared unhealthy after
        # timeout_s and killed again, until max_restarts gave the slot up)
        slot.endpoint, slot.state, slot.since, slot.inflight, slot.last_ok = None, "starting", time.monotonic(), 0, 0.0
        self._event(slot, "launched", pid=slot.proc.pid)

    def kill(self, key: str) -> int | None:
        """SIGKILL a managed slot's process (fault injection); the heartbeat notices and restarts."""
        slot = self.slots.get(key)
        if slot is None or slot.proc is None or slot.proc.poll() is not None:
            return None
        os.killpg(slot.proc.pid, signal.SIGKILL)
        self._event(slot, "killed", pid=slot.proc.pid)
        return slot.proc.pid

    # -- routing ----------------------------------------------------------------------------------
    def acquire(self, role: str, task: str | None = None, exclude: set[str] | frozenset = frozenset(),
                only: str | None = None) -> Slot | None:
        """The least-loaded healthy server of this role (and task) with free capacity; ``only``:
        that server or none (a session lives on one task-service replica)."""
        with self.lock:
            free = [s for s in self.slots.values() if s.role == role and s.task == task and s.state == "healthy"
                    and s.inflight < s.capacity and s.key not in exclude and only in (None, s.key)]
            if not free and only is None:
                free = [s for s in self.slots.values() if s.role == role and s.task == task
                        and s.state == "healthy" and s.inflight < s.capacity]
            if not free:
                return None
            slot = min(free, key=lambda s: (s.inflight / s.capacity, s.key))
            slot.inflight += 1
            return slot

    def release(self, slot: Slot) -> None:
        with self.lock:
            slot.inflight = max(0, slot.inflight - 1)
            self.lock.notify_all()

    def healthy(self, role: str, task: str | None = None) -> list[Slot]:
        with self.lock:
            return [s for s in self.slots.values() if s.role == role and s.task == task and s.state == "healthy"]

    def wait_healthy(self, n_by: dict[tuple[str, str | None], int], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while True:
                if all(len([s for s in self.slots.values() if (s.role, s.task) == k and s.state == "healthy"]) >= n
                       for k, n in n_by.items()):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.2))

    # -- heartbeats -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def _heartbeats(self) -> None:
        while not self._stop.wait(self.hb.interval_s):
            for slot in list(self.slots.values()):
                if slot.state != "stopped":
                    self._beat(slot)

    def _beat(self, slot: Slot) -> None:
        now = time.monotonic()
        exited = slot.proc is not None and slot.proc.poll() is not None
        ok = warming = False
        if slot.endpoint and not exited:
            res = call(f"{slot.endpoint}/health", None, timeout_s=min(self.hb.timeout_s, 2.0))
            if not isinstance(res, CallFailure):
                warming = res.get("status") == "warming"
                ok = not warming
                if "weight_version" in res:
                    slot.info["weight_version"] = res["weight_version"]
            elif res.kind == "http_503" and "warming" in res.message:
                warming = True
        with self.lock:
            if ok or warming:
                slot.last_ok = now
                if slot.state in ("starting", "warming") or (ok and slot.state != "healthy"):
                    new = "healthy" if ok else "warming"
                    if new != slot.state:
                        slot.state = new
                        self._event(slot, new)
                        self.lock.notify_all()
                return
            in_grace = now - slot.since < self.hb.first_wait_s and slot.last_ok == 0.0
            silent = now - max(slot.last_ok, slot.since) > self.hb.timeout_s
            if not exited and (in_grace or not silent):
                return
            if slot.state == "unhealthy":  # already handled (and not restartable)
                return
            slot.state = "unhealthy"
            self._event(slot, "unhealthy", exited=exited)
        self.on_unhealthy(slot)
        if slot.managed and self.hb.restart and not self._stop.is_set():
            if slot.restarts >= self.hb.max_restarts:
                with self.lock:
                    slot.state = "stopped"
                    self._event(slot, "gave_up")
                return
            if slot.proc is not None and slot.proc.poll() is None:
                os.killpg(slot.proc.pid, signal.SIGKILL)
                slot.proc.wait()
            slot.restarts += 1
            self._launch(slot)

    def _event(self, slot: Slot, what: str, **extra) -> None:
        self.events.append({"t": round(time.monotonic(), 3), "key": slot.key, "event": what, **extra})
        self.log(f"[registry] {slot.key}: {what}" + (f" {extra}" if extra else ""))

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            slots = list(self.slots.values())
        for slot in slots:
            slot.state = "stopped"
            if slot.proc is not None and slot.proc.poll() is None:
                try:
                    os.killpg(slot.proc.pid, signal.SIGTERM)
                    # a task service closes its sessions' containers on the way out: give it the time
                    slot.proc.wait(timeout=60 if slot.role == "task" else 5)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    try:
                        os.killpg(slot.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    slot.proc.wait()

    def view(self) -> list[dict]:
        with self.lock:
            return [s.view() for s in self.slots.values()]
