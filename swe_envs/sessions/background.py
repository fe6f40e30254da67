"""Background work a shutdown must wait for: daemon threads die with the process, so a container one
was starting or removing would outlive it (a clean run once left a primed verifier running)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Background:
    """Daemon threads, each tracked from its start to its end; ``wait`` joins those in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def spawn(self, fn: Callable[[], None], name: str) -> None:
        def body() -> None:
            try:
                fn()
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        t = threading.Thread(target=body, daemon=True, name=name)
        with self._lock:  # started under the lock: ``wait`` never sees (and joins) one not yet started
            self._threads.add(t)
            t.start()

    def wait(self, timeout_s: float) -> int:
        """Join the threads in flight (a thread's own call skips itself); how many still run after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                pending = [t for t in self._threads if t is not threading.current_thread()]
            if not pending or time.monotonic() > deadline:
                return len(pending)
            pending[0].join(max(0.0, deadline - time.monotonic()))
