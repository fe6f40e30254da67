"""The acceptance interface: ``python -m training.megatron ... --checkpoint-dir D [--resume]``.

A run stopped after 2 steps (Megatron ``dist_checkpointing`` save, torch_dist format) and
resumed for 2 more in a fresh process must reproduce the uninterrupted 4-step run exactly:
every logged loss and every weight (same threads, same reduction order: bit-exact on CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from training.megatron.train import load_megatron_config, train

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "train_tiny.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def cli(tmp: Path, shards: Path, metrics: Path, *extra: str) -> str:
    cmd = [sys.executable, "-m", "training.megatron", "--config", str(CONFIG), "--shards", str(shards),
           "--steps", "4", "--metrics", str(metrics), "--checkpoint-dir", str(tmp / "ckpt"), *extra]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, env=ENV, capture_output=True, text=True, timeout=240)  # not the repo dir
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_cli_stop_and_resume_is_bit_exact(small_shards, tmp_path):
    cfg = load_megatron_config(CONFIG, ["steps=4"])
    straight = train(cfg, small_shards["dir"], tmp_path / "straight.jsonl", log=lambda m: None)

    metrics = tmp_path / "m.jsonl"
    out = cli(tmp_path, small_shards["dir"], metrics, "--stop-after", "2")
    assert "step-00000002" in out
    out = cli(tmp_path, small_shards["dir"], metrics, "--resume")
    assert "trained 2 steps" in out and (tmp_path / "ckpt" / "step-00000004" / "metadata.json").is_file()

    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert {"step", "loss", "lm_loss", "lr", "tokens"} <= set(rows[0])
    for r, s in zip(rows, straight.metrics, strict=True):
        assert (r["loss"], r["lm_loss"], r["mtp_loss"], r["grad_norm"], r["lr"]) == (
            s["loss"], s["lm_loss"], s["mtp_loss"], s["grad_norm"], s["lr"])  # fmt: skip

    # the resumed run's final checkpoint holds the straight run's weights, bit for bit
    from megatron.core import dist_checkpointing

    from training.megatron.cpu import cpu_stand_ins
    from training.megatron.world import World

    expected = {k: v for k, v in straight.model.state_dict().items() if not k.endswith("_extra_state")}
    with cpu_stand_ins():
        world = World(cfg)
        try:
            sharded = {k: v for k, v in straight.model.sharded_state_dict().items() if k in expected}
            loaded = dist_checkpointing.load(sharded, str(tmp_path / "ckpt" / "step-00000004"))
        finally:
            world.close()
    assert set(expected) <= set(loaded)  # (plus the common state: trainer, optimizer)
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
