"""Which trainer wrote a checkpoint, and the model it records, without importing either trainer.

``--init-from`` (``train.py``) and ``convert.py`` accept a checkpoint of ours (a step directory
with ``model.safetensors``, what ``training.trainer`` and ``training.hf import`` write) or a
Megatron dist checkpoint (``metadata.json`` + ``common.pt``), or a directory of ``step-*``
(the latest is taken). Kept apart from both so neither trainer imports the other through it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from core.errors import InputError
from training.checkpoint import checkpoint_config, latest_checkpoint
from training.megatron import checkpoint as megatron_checkpoint
from training.model.config import ModelConfig

Kind = Literal["ours", "megatron"]


def resolve(path: str | Path) -> tuple[Kind, Path]:
    """Which trainer wrote ``path`` (a step directory, or a checkpoint directory: its latest step)."""
    path = Path(path)
    for step in (path, latest_checkpoint(path)):
        if step is None:
            continue
        if (step / "model.safetensors").is_file():
            return "ours", step
        if megatron_checkpoint.is_megatron_checkpoint(step):
            return "megatron", step
    raise InputError(f"{path}: no checkpoint of ours (model.safetensors) or of Megatron (metadata.json, common.pt)")


def recorded_config(kind: Kind, step: Path) -> dict[str, Any]:
    """The trainer config the checkpoint records (as JSON), its model's vocab size filled in
    (both trainers record the YAML's 0, "from the shards", before they resolved it)."""
    if kind == "ours":
        config = dict(json.loads((step / "trainer.json").read_text(encoding="utf-8")).get("config") or {})
        return {**config, "model": checkpoint_config(step).model_dump(mode="json")}
    config = dict(megatron_checkpoint.common_state(step).get("config") or {})
    model = dict(config.get("model") or {})
    if not model:
        raise InputError(f"{step}: records no model config (config.model)")
    if not model.get("vocab_size"):
        from megatron.core import dist_checkpointing

        meta = dist_checkpointing.load_tensors_metadata(str(step))
        model["vocab_size"] = int(meta["embedding.word_embeddings.weight"].global_shape[0])
    return {**config, "model": model}


def model_config(path: str | Path) -> ModelConfig:
    kind, step = resolve(path)
    return ModelConfig.model_validate(recorded_config(kind, step)["model"]).check(f"{step}: config.model")


def differing_fields(yaml_model: ModelConfig, recorded: ModelConfig) -> list[str]:
    """Model fields where the training YAML and the checkpoint's recorded config disagree."""
    a, b = yaml_model.model_dump(), recorded.model_dump()
    return [f"{k}: yaml {a[k]!r}, checkpoint {b[k]!r}" for k in a if a[k] != b.get(k) and k != "vocab_size"]

