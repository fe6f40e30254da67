"""Checkpoints, resume and the finished model of ``training.sft.hf``.

Every ``checkpoint.every`` steps the run saves ``step-N/`` under ``checkpoint.dir`` (default
``OUT/hf_checkpoints``) in an HF policy's checkpoint layout (``training.policy.hf.HFPolicy.save``:
``save_pretrained`` + tokenizer, ``optimizer.pt`` with the optimizer and RNG states,
``trainer.json``), written under a temporary name and renamed (``training.checkpoint.publish``),
then keeps the newest ``checkpoint.keep``. ``trainer.json`` holds the step, the data-order
position, the held-out loss before training and the run's **fingerprint**: the settings that
decide the trajectory (``model``, the trainer config without ``checkpoint``, ``threads`` and
``tensorboard_dir``) and a digest of the samples in training order (so the data files, the
tokenizer, the template and the mixture are all in it). A re-run resumes from the latest
complete checkpoint only when its fingerprint matches, and otherwise stops with one line naming
what differs.

The finished model, ``OUT/hf``, is published the same way (a complete directory renamed into
place) with a ``trainer.json`` holding the final step, the fingerprint and the run's summary:
a re-run of a finished run recognises it, trains nothing and writes nothing but a missing
``sft.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ConfigError
from training.checkpoint import latest_checkpoint, prune_checkpoints, publish

# trainer settings that do not change what is computed: where and how often to save, threads, logs
_NOT_FINGERPRINTED = {"checkpoint", "threads", "tensorboard_dir"}


def fingerprint(model_cfg, tcfg, samples: list[tuple[str, list[int], list[int]]]) -> dict[str, Any]:
    """The settings and a digest of the samples (category, ids, mask; in training order, the
    held-out ones after them) that a checkpoint must share with the run resuming from it."""
    h = hashlib.sha256()
    for cat, ids, mask in samples:
        h.update(cat.encode() + b"\0")
        h.update(np.asarray(ids, dtype=np.int64).tobytes() + b"\1")
        h.update(np.asarray(mask, dtype=np.int8).tobytes() + b"\2")
    return {
        "config": {
            "model": model_cfg.model_dump(mode="json"),
            "train": tcfg.model_dump(mode="json", exclude=_NOT_FINGERPRINTED),
        },
        "data_sha256": h.hexdigest(),
    }


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [path]


def check_fingerprint(path: Path, state: dict[str, Any], fp: dict[str, Any]) -> None:
    """Refuse a checkpoint written by a run with other settings or data (one line, naming them)."""
    saved = state.get("fingerprint") or {}
    diff = _differences(saved.get("config"), fp["config"])
    if saved.get("data_sha256") != fp["data_sha256"]:
        diff.append("the training samples (data, tokenizer, template or mixture)")
    if diff:
        shown = ", ".join(diff[:6]) + (f" and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise ConfigError(
            f"{path} was written by a run with other settings: {shown} differ; "
            f"delete it (or set another out) to start over"
        )


def read_state(path: Path) -> dict[str, Any]:
    return json.loads((path / "trainer.json").read_text(encoding="utf-8"))


def latest(root: Path, fp: dict[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """The latest complete checkpoint under ``root`` and its state, checked against ``fp``."""
    found = latest_checkpoint(root)
    if found is None:
        return None
    state = read_state(found)
    check_fingerprint(found, state, fp)
    return found, state


def save_step(root: Path, step: int, model, tok, opt, state: dict[str, Any], keep: int) -> Path:
    """``root/step-N`` (complete or absent), then only the newest ``keep`` step directories."""
    from training.policy.hf import HFPolicy

    path = HFPolicy(model, tok).save(root, step, opt, state)
    prune_checkpoints(root, keep)
    return path


def finished(final: Path, fp: dict[str, Any]) -> dict[str, Any] | None:
    """The state of a finished model at ``final`` written by this run's settings, else None (none
    there, or one from before this layout: the run trains and replaces it). Another run's is refused."""
    if not (final / "trainer.json").is_file():
        return None
    state = read_state(final)
    check_fingerprint(final, state, fp)
    return state


def publish_final(final: Path, model, tok, state: dict[str, Any]) -> None:
    """``save_pretrained`` + tokenizer + ``trainer.json`` at ``final``, renamed into place whole."""
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "trainer.json").write_text(json.dumps({**state, "policy": "hf"}, indent=1), encoding="utf-8")
    publish(tmp, final)
