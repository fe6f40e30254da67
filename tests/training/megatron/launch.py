"""``python -m training.megatron`` on two gloo ranks under torchrun, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.training.test_expert_parallel import free_port

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "train_tiny.yaml"


def torchrun_megatron(cwd: Path, shards: Path, steps: int, sets: list[str], *extra: str) -> list[dict]:
    """Train ``steps`` steps on 2 ranks with ``--set`` overrides; returns the metrics rows."""
    metrics = cwd / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "-m", "training.megatron", "--config", str(CONFIG),
           "--shards", str(shards), "--steps", str(steps), "--metrics", str(metrics),
           *[x for s in sets for x in ("--set", s)], *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(x) for x in metrics.read_text().splitlines()]
