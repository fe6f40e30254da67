"""A disk limit for containers whose writable layer Docker cannot cap.

overlay2 on ext4 (the usual engine here) has no per-container quota (``--storage-opt size`` needs xfs
with project quotas), and a per-file ``fsize`` ulimit bounds one file, not many. So untrusted commands
(agent tool calls, a task's ``solve.sh``, LLM-written tasks) could fill the host's disk. The guard
gives every container both: the ``fsize`` ulimit (no single file above the limit, enforced by the
kernel) and a watcher that measures each container's writable layer every ``poll_s`` and kills the
container once it passes ``limit_mb``; the reason is kept for the caller's result.

The bound is the limit plus what a command writes between a measurement and the kill, so both are
made short: where this process can read the engine's overlay upper directory (the engine runs on this
host and we are root, as in CI) the layer is summed straight from the directory (a few ms, no engine
round trip; polled every 0.1 s) and the container's init is killed by its host pid, which ends every
process of its pid namespace at once. Otherwise the engine's own measure (``SizeRw``) is asked over the
API and the container is killed through it. ``dd`` from ``/dev/zero`` writes ~1 GB/s into the page
cache, so an engine round trip of a second under load (``SizeRw`` walks the layer inside dockerd) had
let a disk bomb reach 5x a 128 MB limit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker.types


def fsize_ulimit(limit_mb: int) -> docker.types.Ulimit:
    """No single file above the limit (the kernel refuses the write: EFBIG / SIGXFSZ)."""
    return docker.types.Ulimit(name="fsize", soft=limit_mb * 2**20, hard=limit_mb * 2**20)


def tree_bytes(root: str) -> int:
    """Bytes a directory tree holds on disk: per file the larger of its length and its allocated blocks
    (ext4 counts delayed-allocation blocks in ``st_blocks``), hard links once, symlinks not followed."""
    total, seen, stack = 0, set(), [root]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:  # removed meanwhile, or not ours to read
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                if st.st_nlink > 1:
                    if st.st_ino in seen:
                        continue
                    seen.add(st.st_ino)
                total += max(st.st_size, st.st_blocks * 512)
    return total


def _start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot); '' when unknown."""
    if pid <= 0:
        return ""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@dataclass
class _Watched:
    cid: str
    upper: str | None  # the overlay upper directory on this host, when readable
    pid: int  # the container init's host pid (0: unknown)
    started: str  # that process's start time: a pid reused after the container ended is never killed


class DiskGuard:
    def __init__(self, api, limit_mb: int, poll_s: float = 0.5, on_exceed: Callable[[str], None] | None = None,
                 host_poll_s: float = 0.1):
        self.api, self.limit, self.poll_s, self.host_poll_s = api, limit_mb * 2**20, poll_s, host_poll_s
        self.on_exceed = on_exceed
        self.watched: list[_Watched] = []
        self.peak = 0
        self.exceeded = ""  # why the containers were stopped ('' while within the limit)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, container_id: str) -> None:
        self.watched.append(self._locate(container_id))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="disk-guard")
            self._thread.start()

    def _locate(self, cid: str) -> _Watched:
        try:
            info = self.api.inspect_container(cid)
        except Exception:  # measured through the API instead
            return _Watched(cid, None, 0, "")
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
        # readable only where the engine is local and this process may enter its directories (root)
        usable = bool(upper) and os.path.isdir(upper) and os.access(upper, os.R_OK | os.X_OK)
        pid = int((info.get("State") or {}).get("Pid") or 0) if usable else 0
        return _Watched(cid, upper if usable else None, pid, _start_time(pid))

    def _size(self, w: _Watched) -> int | None:
        if w.upper is not None:
            return tree_bytes(w.upper)
        try:
            rows = self.api.containers(all=True, size=True, filters={"id": w.cid})
        except Exception:  # the engine did not answer this time: measured at the next poll
            return None
        return int(rows[0].get("SizeRw") or 0) if rows else None

    def _run(self) -> None:
        wait = self.host_poll_s if all(w.upper is not None for w in self.watched) else self.poll_s
        last: tuple[float, int] | None = None
        while not self._stop.wait(wait):
            t0 = time.monotonic()
            watched = list(self.watched)
            total = sum(self._size(w) or 0 for w in watched)
            self.peak = max(self.peak, total)
            if total > self.limit and not self.exceeded:
                self.exceeded = (f"disk limit: the containers' writable layers reached {total // 2**20} MB "
                                 f"(limit {self.limit // 2**20} MB); stopped")
                self._kill(watched)
                if self.on_exceed:
                    self.on_exceed(self.exceeded)
                return
            host = bool(watched) and all(w.upper is not None for w in watched)
            # never spend more than about a fifth of a core measuring a large layer
            wait = max(self.host_poll_s if host else self.poll_s, 4 * (time.monotonic() - t0))
            # ... unless the layer grows fast enough to pass the limit before the next look: then look
            # again as soon as the host scan allows (a fast writer was seen 500 MB past the limit)
            rate = (total - last[1]) / max(t0 - last[0], 1e-3) if last else 0.0
            if host and rate > 0 and total + rate * wait > self.limit:
                wait = self.host_poll_s / 4
            last = (t0, total)

    def _kill(self, watched: list[_Watched]) -> None:
        for w in watched:
            if w.pid > 0 and w.started and _start_time(w.pid) == w.started:
                try:  # the init of the container's pid namespace: the kernel ends every process in it
                    os.kill(w.pid, signal.SIGKILL)
                except OSError:
                    pass
        for w in watched:
            try:
                self.api.kill(w.cid)
            except Exception:
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
