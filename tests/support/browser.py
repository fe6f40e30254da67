"""Headless Debian Chromium for tests that must see a page rendered (test setup: installs the
``chromium`` package with apt when it is missing and we are root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# The flags a sandboxed root CI machine needs; background services would only try (and fail)
# to reach the network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=5000"]


def ensure_chromium() -> str:
    path = shutil.which("chromium")
    if path:
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError("chromium is not installed; run: apt-get install -y chromium")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    res = subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, capture_output=True, env=env)
    return shutil.which("chromium")


def render(url: str, profile: Path, screenshot: Path | None = None) -> str:
    """The DOM after the page's load handlers ran (and optionally a PNG screenshot)."""
    exe = ensure_chromium()
    base = [exe, *FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    if screenshot is not None:
        subprocess.run([*base, f"--screenshot={screenshot}", "--window-size=1400,2400", url],
                       capture_output=True, timeout=120, check=True)
    return dom
