"""`python -m training.rl orchestrator --config C`: what C may be (an RL config as is, the shipped
standalone config) and what is derived from it (checkpoint, tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError
from training.policy.codec import Codec
from training.rl.rollout.cli import load_orchestrator_config

ROOT = Path(__file__).resolve().parents[4]


def test_orchestrator_takes_an_rl_config_as_is(tmp_path):
    """`orchestrator --config configs/rl_async_tiny.yaml`: the servers start as `train` starts them."""
    cfg = load_orchestrator_config(ROOT / "configs/rl_async_tiny.yaml", tmp_path)
    ckpt = Path(cfg.checkpoint)
    assert ckpt.parent == tmp_path / "checkpoints" and (ckpt / "model.safetensors").is_file()
    assert json.loads((ckpt / "trainer.json").read_text())["weight_version"] == 0
    assert Path(cfg.tokenizer) == tmp_path / "tokenizer.json" and [t.name for t in cfg.tasks] == ["copy", "lookup"]


def test_shipped_standalone_config_and_its_tokenizer_default(tmp_path):
    """configs/orchestrator_tiny.yaml (servers register themselves) loads as is: toy tasks only and no
    tokenizer named means the toy tasks' tokenizer; a task that renders text needs one named."""
    cfg = load_orchestrator_config(ROOT / "configs/orchestrator_tiny.yaml", tmp_path)
    assert cfg.rollout.replicas == 0 and [t.name for t in cfg.tasks] == ["copy", "lookup"]
    assert Path(cfg.tokenizer) == tmp_path / "tokenizer.json"
    codec = Codec.load(cfg.tokenizer)
    assert codec.decode(codec.encode("copy 1 2 =")) == "copy 1 2 ="  # the toy vocabulary's words
    (tmp_path / "search.yaml").write_text(yaml.safe_dump({"tasks": [{"name": "s", "kind": "search"}]}))
    with pytest.raises(ConfigError, match="tokenizer"):
        load_orchestrator_config(tmp_path / "search.yaml", tmp_path / "o2")
