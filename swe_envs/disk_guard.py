"""A disk limit for containers whose writable layer Docker cannot cap.

overlay2 on ext4 (the usual engine here) has no per-container quota (``--storage-opt size`` needs xfs
with project quotas), and a per-file ``fsize`` ulimit bounds one file, not many. So untrusted commands
(agent tool calls, a task's ``solve.sh``, LLM-written tasks) could fill the host's disk. The guard
gives every container both: the ``fsize`` ulimit (no single file above the limit, enforced by the
kernel) and a watcher that reads each container's writable-layer size (``SizeRw``, the engine's own
measure) every ``poll_s`` and kills the container once it passes ``limit_mb``; the reason is kept for
the caller's result. The bound is the limit plus what a command writes in one polling interval.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import docker.types


def fsize_ulimit(limit_mb: int) -> docker.types.Ulimit:
    """No single file above the limit (the kernel refuses the write: EFBIG / SIGXFSZ)."""
    return docker.types.Ulimit(name="fsize", soft=limit_mb * 2**20, hard=limit_mb * 2**20)


class DiskGuard:
    def __init__(self, api, limit_mb: int, poll_s: float = 0.5, on_exceed: Callable[[str], None] | None = None):
        self.api, self.limit, self.poll_s = api, limit_mb * 2**20, poll_s
        self.on_exceed = on_exceed
        self.ids: list[str] = []
        self.peak = 0
        self.exceeded = ""  # why the containers were stopped ('' while within the limit)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, container_id: str) -> None:
        self.ids.append(container_id)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="disk-guard")
            self._thread.start()

    def _size(self, cid: str) -> int | None:
        try:
            rows = self.api.containers(all=True, size=True, filters={"id": cid})
        except Exception:  # the engine did not answer this time: measured at the next poll
            return None
        return int(rows[0].get("SizeRw") or 0) if rows else None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            total = 0
            for cid in list(self.ids):
                size = self._size(cid)
                total += size or 0
            self.peak = max(self.peak, total)
            if total > self.limit and not self.exceeded:
                self.exceeded = (f"disk limit: the containers' writable layers reached {total // 2**20} MB "
                                 f"(limit {self.limit // 2**20} MB); stopped")
                for cid in list(self.ids):
                    try:
                        self.api.kill(cid)
                    except Exception:
                        pass
                if self.on_exceed:
                    self.on_exceed(self.exceeded)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
