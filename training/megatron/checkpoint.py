"""Megatron ``dist_checkpointing`` save and resume for the Megatron trainer.

A checkpoint is a directory ``step-00000012/`` in Megatron's distributed format (torch_dist:
each rank writes its shards of the model's ``sharded_state_dict`` and of the optimizer's,
built by Megatron's ``FP32Optimizer.sharded_state_dict`` against the model's), so it reloads
on another tensor-parallel layout. Beside the tensors, the "common" state (written once by
rank 0) holds what a run needs to continue bit-exactly: the step, the loader position, torch's
RNG state and the producing config. Written under a temporary name and renamed
(``training.checkpoint.publish``), so a listed checkpoint is complete; ``latest_checkpoint`` is
our trainer's.

A *weights-only* checkpoint (``save`` without an optimizer; what ``convert.py`` writes from our
checkpoints) marks ``weights_only`` in its common state: resuming from it loads the model and
keeps the freshly built optimizer, since optimizer state does not convert between optimizers.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from core.errors import InputError
from training.checkpoint import PREFIX, latest_checkpoint, publish

__all__ = ["common_state", "is_megatron_checkpoint", "latest_checkpoint", "load", "load_weights", "save"]


def _model_keys(chunks: list) -> list[str]:
    # Megatron-LM's names: "model" for one chunk, "model0", "model1", ... per virtual stage; the
    # tensors inside carry whole-model keys, so any layout reads them back
    return ["model"] if len(chunks) == 1 else [f"model{i}" for i in range(len(chunks))]


def _model_sharded(chunks: list) -> dict[str, Any]:
    from megatron.core.transformer.utils import ensure_metadata_has_dp_cp_group

    # Megatron 0.16.1's GPTModel.sharded_state_dict reads metadata["dp_cp_group"] on a pipeline
    # stage holding MTP without the embedding stage, but fills the default only in its parent's
    # copy (TypeError: 'NoneType' object is not subscriptable): pass it filled
    return {key: chunk.sharded_state_dict(metadata=ensure_metadata_has_dp_cp_group(None))
            for key, chunk in zip(_model_keys(chunks), chunks, strict=True)}  # fmt: skip


def _sharded(chunks: list, optimizer, is_loading: bool) -> dict[str, Any]:
    state = _model_sharded(chunks)
    if optimizer is not None:
        state["optimizer"] = optimizer.sharded_state_dict(dict(state), is_loading=is_loading)
    return state


def _load_models(chunks: list, loaded: dict[str, Any]) -> None:
    for key, chunk in zip(_model_keys(chunks), chunks, strict=True):
        chunk.load_state_dict(loaded[key])


def is_megatron_checkpoint(path: str | Path) -> bool:
    """A step directory written by ``dist_checkpointing`` (its ``metadata.json`` names the format)."""
    return (Path(path) / "metadata.json").is_file() and (Path(path) / "common.pt").is_file()


def common_state(path: str | Path) -> dict[str, Any]:
    """The trainer's common state (step, loader, config, ...) without loading any tensor."""
    from megatron.core import dist_checkpointing

    path = Path(path)
    if not is_megatron_checkpoint(path) or not dist_checkpointing.check_is_distributed_checkpoint(str(path)):
        raise InputError(f"{path}: not a Megatron distributed checkpoint")
    return dict(dist_checkpointing.load_common_state_dict(str(path)).get("trainer", {}))


def save(root: str | Path, step: int, chunks: list, optimizer, extra: dict[str, Any]) -> Path:
    """All ranks call this (collective). ``chunks``: this rank's unwrapped GPTModels (one per
    virtual pipeline stage); ``optimizer`` None writes a weights-only checkpoint."""
    from megatron.core import dist_checkpointing

    root = Path(root)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".{final.name}.tmp"
    if dist.get_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    state = _sharded(chunks, optimizer, is_loading=False)
    state["trainer"] = {"step": step, "rng": torch.get_rng_state(), "weights_only": optimizer is None, **extra}
    dist_checkpointing.save(state, str(tmp))
    dist.barrier()
    if dist.get_rank() == 0:
        publish(tmp, final)
    dist.barrier()
    return final


def load(path: str | Path, chunks: list, optimizer) -> dict[str, Any]:
    """Load weights, optimizer state and RNG state in place; return the trainer state. A
    weights-only checkpoint leaves ``optimizer`` and the RNG as they are."""
    from megatron.core import dist_checkpointing

    path = Path(path)
    if common_state(path).get("weights_only"):
        return load_weights(path, chunks)
    state = _sharded(chunks, optimizer, is_loading=True)
    state["trainer"] = {}  # common state: filled from the checkpoint
    loaded = dist_checkpointing.load(state, str(path))
    _load_models(chunks, loaded)
    optimizer.load_state_dict(loaded["optimizer"])
    trainer = dict(loaded["trainer"])
    torch.set_rng_state(trainer.pop("rng"))
    return trainer


def load_weights(path: str | Path, chunks: list) -> dict[str, Any]:
    """Load only the model's tensors (any optimizer state in the checkpoint is left unread);
    return the trainer state. Megatron reshards: the checkpoint may come from another
    TP/PP/VPP/EP layout, or from the other experts module (``experts.py``)."""
    from megatron.core import dist_checkpointing

    trainer = common_state(path)
    loaded = dist_checkpointing.load(_model_sharded(chunks), str(path))
    _load_models(chunks, loaded)
    trainer.pop("rng", None)
    return trainer
