"""One YAML drives both trainers: ``backend: megatron`` makes ``python -m training.trainer`` train
through Megatron-core (training.megatron), with the same metrics rows."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from training.trainer import app

ROOT = Path(__file__).resolve().parents[3]


def test_backend_megatron_from_our_trainer_cli(small_shards, tmp_path):
    metrics = tmp_path / "m.jsonl"
    args = ["--config", str(ROOT / "configs" / "train_tiny.yaml"), "--shards", str(small_shards["dir"]),
            "--steps", "2", "--metrics", str(metrics), "--set", "backend=megatron"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and {r["backend"] for r in rows} == {"megatron"}
    assert {"loss", "lm_loss", "mtp_loss", "lr", "tokens"} <= set(rows[0])
