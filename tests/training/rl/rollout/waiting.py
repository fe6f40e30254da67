"""Polling for the orchestrator tests: conditions that other processes make true."""

from __future__ import annotations

import time


def wait_until(pred, timeout_s: float = 60.0, what: str = "", poll_s: float = 0.1):
    """``pred()``'s first truthy value within ``timeout_s``; a test failure naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")
