"""Faults a server injects into its own replies, counted: one line in ``OUT/faults.jsonl`` each.

``ServerFaults`` wraps the route handlers of a rollout server or a task service and, per request,
answers late or with a garbled body with the configured probabilities (seeded, so a run is
reproducible). ``log_fault`` is the one writer of ``faults.jsonl`` (every process of a run appends
to it: servers, the orchestrator's process killer, the trainer's deliberate crash) and
``count_faults`` its reader, so faults are counted even across restarts of the processes that
injected them. Killing processes is the orchestrator's side (``training.rl.rollout.faults``).
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
