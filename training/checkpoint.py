"""Checkpoints: safetensors weights + optimizer/RNG state + trainer state (step, loader position).

A checkpoint is a directory ``step-00000120/`` holding ``model.safetensors`` (the model's state
dict, buffers such as the expert bias included), ``optimizer.pt`` (optimizer state and torch's
RNG state) and ``trainer.json`` (step, stage, loader state, the producing config). It is written
under a temporary name and renamed, so a listed checkpoint is complete. Re-saving a step that
exists moves the old directory aside first (``.step-….old``) and deletes it only after the new
one is in place; a kill between the two renames leaves the old checkpoint aside, and
``latest_checkpoint`` puts it back, so no window loses the step. Loading refuses a checkpoint
whose tensors do not match the model (another config) and lists the mismatches.
``checkpoint_config`` / ``load_model`` read a step directory back as a model (HF export,
Megatron conversion, RL and serving). ``prune_checkpoints`` keeps the newest K (``checkpoint.keep``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from core.errors import InputError, UserError
from training.model.config import ModelConfig
from training.model.glm import GLMModel

PREFIX = "step-"


def save_checkpoint(
    root: str | Path, step: int, model: torch.nn.Module, optimizer, state: dict[str, Any]
) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, tmp / "model.safetensors")
    torch.save({"optimizer": optimizer.state_dict(), **rng_state()}, tmp / "optimizer.pt")
    (tmp / "trainer.json").write_text(json.dumps({"step": step, **state}, indent=1), encoding="utf-8")
    publish(tmp, final)
    return final


def rng_state() -> dict[str, Any]:
    """torch's RNG state (``rng``) and, once this process uses CUDA, its current device's
    (``cuda_rng``; not every device's, which would open a context on each), as ``optimizer.pt``
    holds them."""
    out: dict[str, Any] = {"rng": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_rng"] = torch.cuda.get_rng_state()
    return out


def _aside(final: Path) -> Path:
    return final.with_name(f".{final.name}.old")


def publish(tmp: Path, final: Path) -> None:
    """Put the complete directory ``tmp`` at ``final``; an existing ``final`` is replaced without a
    moment where neither the old nor the new checkpoint is on disk (see ``recover_checkpoints``)."""
    aside = _aside(final)
    if final.exists():
        shutil.rmtree(aside, ignore_errors=True)  # a stale aside of an earlier, completed re-save
        os.replace(final, aside)
    os.replace(tmp, final)
    shutil.rmtree(aside, ignore_errors=True)


def recover_checkpoints(root: Path) -> None:
    """Undo a re-save killed between its two renames: the old checkpoint (aside) comes back when no
    new one took its place; an aside whose new checkpoint is in place is deleted. Tolerates other
    ranks recovering the same directory at the same time."""
    for aside in root.glob(f".{PREFIX}*.old"):
        final = aside.with_name(aside.name[1 : -len(".old")])
        try:
            if final.is_dir():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.rename(aside, final)
        except OSError:
            pass  # another process recovered it first


def latest_checkpoint(root: str | Path) -> Path | None:
    root = Path(root)
    if root.is_dir():
        recover_checkpoints(root)
    found = sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir()) if root.is_dir() else []
    return found[-1] if found else None


def prune_checkpoints(root: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` step directories under ``root`` (0 keeps all); returns
    the deleted ones. Called after a save has been published, so the newest is always complete."""
    root = Path(root)
    if keep <= 0 or not root.is_dir():
        return []
    old = sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir())[:-keep]
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    return old


def mismatches(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> list[str]:
    """Human-readable differences between a model's state dict and a checkpoint's."""
    out = [
        f"shape {k}: checkpoint {tuple(got[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in got and got[k].shape != v.shape
    ]
    out += [f"missing {k} {tuple(v.shape)}" for k, v in expected.items() if k not in got]
    out += [f"unexpected {k} {tuple(v.shape)}" for k, v in got.items() if k not in expected]
    return out


def load_checkpoint(path: str | Path, model: torch.nn.Module, optimizer=None) -> dict[str, Any]:
    """Load weights (and optimizer + RNG state when ``optimizer`` is given); return trainer state."""
    path = Path(path)
    for name in ("model.safetensors", "optimizer.pt", "trainer.json"):
        if not (path / name).is_file():
            raise InputError(f"{path}: not a checkpoint (no {name})")
    weights = load_file(path / "model.safetensors")
    bad = mismatches(model.state_dict(), weights)
    if bad:
        shown = "; ".join(bad[:50]) + (f"; ... {len(bad) - 50} more" if len(bad) > 50 else "")
        raise UserError(
            f"{path}: checkpoint is from another model config ({len(bad)} mismatching tensors): {shown}"
        )
    model.load_state_dict(weights)
    if optimizer is not None:
        load_optimizer_state(path, optimizer)
    return json.loads((path / "trainer.json").read_text(encoding="utf-8"))


def load_optimizer_state(path: str | Path, optimizer) -> None:
    """A checkpoint's ``optimizer.pt``: the optimizer state and torch's RNG state (the current
    CUDA device's too when it holds one and this machine has CUDA)."""
    blob = torch.load(Path(path) / "optimizer.pt", weights_only=True)
    optimizer.load_state_dict(blob["optimizer"])
    torch.set_rng_state(blob["rng"])
    if blob.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(blob["cuda_rng"])


def checkpoint_step(path: str | Path) -> Path:
    """A step directory: ``path`` itself, or the latest ``step-*`` under it."""
    path = Path(path)
    if (path / "model.safetensors").is_file():
        return path
    found = latest_checkpoint(path)
    if found is None:
        raise InputError(f"{path}: no checkpoint (neither model.safetensors nor step-* directories)")
    return found


def checkpoint_config(step_dir: Path) -> ModelConfig:
    """The model config a step directory records (HF export, RL, serving and conversion read it)."""
    meta = step_dir / "trainer.json"
    if not meta.is_file():
        raise InputError(f"{step_dir}: not a checkpoint (no trainer.json)")
    model = json.loads(meta.read_text(encoding="utf-8")).get("config", {}).get("model")
    if not model:
        raise InputError(f"{meta}: records no model config (config.model)")
    if not model.get("vocab_size") and (step_dir / "model.safetensors").is_file():
        # the trainer records the YAML's 0 ("from the shard manifest"): the embedding has the size
        with safe_open(str(step_dir / "model.safetensors"), "pt") as st:
            model = {**model, "vocab_size": st.get_slice("embedding.word_embeddings.weight").get_shape()[0]}
    return ModelConfig.model_validate(model).check(f"{meta}: config.model")


def load_model(path: str | Path) -> tuple[GLMModel, Path]:
    """Our model from a checkpoint (weights and buffers exactly as saved), in eval mode."""
    step = checkpoint_step(path)
    model = GLMModel(checkpoint_config(step))
    load_checkpoint(step, model)
    return model.eval(), step
