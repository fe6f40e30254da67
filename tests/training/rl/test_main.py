"""``python -m training.rl``: the subcommand dispatcher."""

from __future__ import annotations

import subprocess
import sys


def test_cli_dispatcher():
    out = subprocess.run([sys.executable, "-m", "training.rl", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout and "stages" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "training.rl", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown subcommand" in bad.stderr
    demo = subprocess.run([sys.executable, "-m", "training.rl", "demo", "--help"], capture_output=True, text=True, check=True)
    assert "--out" in demo.stdout
