"""Fault injection, counted: every injected fault is one line in ``OUT/faults.jsonl``.

Two halves. ``FaultInjector`` runs in the orchestrator and SIGKILLs managed task services and
rollout servers when the number of created groups reaches configured counts (the registry's
heartbeats must then notice, resubmit and restart). ``ServerFaults`` runs inside a task service or
rollout server process and, per request, answers late or with a garbled body with the configured
probabilities (seeded, so a run is reproducible). The trainer crash lives in the trainer. The
run summary reads the file back, so faults are counted even across restarts of the processes
that injected them.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from training.metrics_log import read_log_rows
from training.serving.http_json import RawReply


def log_fault(path: str | Path | None, kind: str, **extra: Any) -> None:
    if path is None:
        return
    line = json.dumps({"t": round(time.time(), 3), "fault": kind, "pid": os.getpid(), **extra}) + "\n"
    with open(path, "a", encoding="utf-8") as fh:  # one short O_APPEND write per fault
        fh.write(line)


def count_faults(path: str | Path) -> dict[str, int]:
    counts = Counter(r["fault"] for r in read_log_rows(Path(path)) if "fault" in r)
    return dict(sorted(counts.items()))


class ServerFaults:
    """Wraps a server's route handlers: some replies are slow, some garbled."""

    def __init__(self, slow_prob: float = 0.0, slow_s: float = 0.0, garble_prob: float = 0.0,
                 log_path: str | None = None, seed: int = 0, who: str = "server"):
        self.slow_prob, self.slow_s, self.garble_prob = slow_prob, slow_s, garble_prob
        self.log_path, self.who = log_path, who
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.slow_prob > 0 or self.garble_prob > 0

    def wrap(self, handler):
        def faulty(body):
            with self.lock:
                slow = self.rng.random() < self.slow_prob
                garble = self.rng.random() < self.garble_prob
            if slow:
                log_fault(self.log_path, f"{self.who}_slow", delay_s=self.slow_s)
                time.sleep(self.slow_s)
            if garble:
                log_fault(self.log_path, f"{self.who}_garbled")
                return RawReply(200, b'{"truncated": [1, 2,')
            return handler(body)

        return faulty


class FaultInjector:
    """Kills managed processes at configured group counts (orchestrator side)."""

    def __init__(self, cfg, orchestrator):
        self.cfg, self.orch = cfg, orchestrator
        self.path = Path(orchestrator.out) / "faults.jsonl"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="faults")
        self._pending = ([("task", n) for n in cfg.kill_task_service_after_groups]
                         + [("rollout", n) for n in cfg.kill_rollout_server_after_groups])
        self._turn: Counter = Counter()

    def start(self) -> None:
        if self._pending:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while self._pending and not self._stop.wait(0.05):
            created = self.orch.counters["groups_created"]
            for role, at in [p for p in self._pending if created >= p[1]]:
                if self._kill(role, at):
                    self._pending.remove((role, at))

    def _kill(self, role: str, at: int) -> bool:
        slots = [s for s in self.orch.registry.slots.values() if s.role == role and s.managed
                 and s.state == "healthy"]
        if not slots:
            return False  # none up right now: try again shortly
        slot = slots[self._turn[role] % len(slots)]
        self._turn[role] += 1
        pid = self.orch.registry.kill(slot.key)
        if pid is None:
            return False
        log_fault(self.path, f"kill_{role}", key=slot.key, pid=pid, after_groups=at)
        return True

    def counts(self) -> dict[str, int]:
        return count_faults(self.path)
