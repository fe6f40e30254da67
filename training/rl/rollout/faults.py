"""Fault injection, counted: every injected fault is one line in ``OUT/faults.jsonl``.

Two halves. ``FaultInjector`` runs in the orchestrator and SIGKILLs managed task services and
rollout servers when the number of created groups reaches configured counts (the registry's
heartbeats must then notice, resubmit and restart). Slow and garbled replies are injected inside
the servers themselves (``training.serving.faults``, which also writes and reads the file). The
trainer crash lives in the trainer. The run summary reads the file back, so faults are counted
even across restarts of the processes that injected them.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from training.serving.faults import count_faults, log_fault


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
