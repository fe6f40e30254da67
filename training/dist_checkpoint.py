"""Sharded checkpoints through ``torch.distributed.checkpoint`` (DCP) that resume on any world size.

A checkpoint is a directory ``step-00000120/`` (the same name and ``trainer.json`` as the
single-process format in ``training/checkpoint.py``) holding DCP's ``.metadata`` and one
``__N_0.distcp`` file per rank. Every tensor is saved under its parameter name with its GLOBAL
shape: FSDP2 parameters are DTensors already; expert-parallel slices are wrapped as DTensors
sharded over the ``ep`` mesh dimension; optimizer state follows its parameter
(``optim.<param name>.<state key>``). DCP then reshards on load, so a run saved on 2 ranks with
2-way expert parallelism resumes on 1, 2 or 4 ranks with any ep that divides the experts, and a
plain single process (no torchrun) can load it too. The directory is written under a
temporary name and renamed by rank 0 after every rank has finished writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from core.errors import InputError
from training.checkpoint import PREFIX, publish
from training.distributed import Parallel, is_expert_param


def is_dcp_checkpoint(path: str | Path) -> bool:
    return (Path(path) / ".metadata").is_file()


def _name_of(model: torch.nn.Module) -> dict[int, str]:
    return {id(p): n for n, p in model.named_parameters()}


def _state(model: torch.nn.Module, optimizer, par: Parallel | None) -> tuple[dict[str, Any], list]:
    """The flat tensor dict DCP saves/loads in place, and (live tensor, wrapper) pairs whose
    values must be copied back after a load (wrappers that may not share storage)."""

    def wrap(name: str, t: torch.Tensor):
        if par is not None and par.ep > 1 and is_expert_param(name):
            w = par.expert_dtensor(t)
            copy_back.append((t, w))
            return w
        return t

    copy_back: list = []
    out: dict[str, Any] = {}
    for name, t in model.state_dict().items():
        out[f"model.{name}"] = wrap(name, t)
    if optimizer is not None:
        names = _name_of(model)
        for group in optimizer.param_groups:
            for p in group["params"]:
                for key, v in optimizer.state[p].items():
                    out[f"optim.{names[id(p)]}.{key}"] = wrap(names[id(p)], v) if v.ndim else v
    return out, copy_back


def save_dcp(
    root: str | Path, step: int, model, optimizer, extra: dict[str, Any], par: Parallel | None
) -> Path:
    root = Path(root)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".{final.name}.tmp"
    main = par is None or par.is_main
    if main:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if par is not None:
        par.barrier()
    state, _ = _state(model, optimizer, par)
    dcp.save(state, checkpoint_id=str(tmp))
    if par is not None:
        par.barrier()
    if main:
        meta = {
            "step": step,
            "format": "dcp",
            "world_size": par.world if par else 1,
            "ep": par.ep if par else 1,
        }
        (tmp / "trainer.json").write_text(json.dumps({**meta, **extra}, indent=1), encoding="utf-8")
        publish(tmp, final)  # an existing step is moved aside, not deleted first
    if par is not None:
        par.barrier()
    return final


def load_dcp(path: str | Path, model, optimizer, par: Parallel | None) -> dict[str, Any]:
    """Load weights and optimizer state (resharded to this run's layout); return trainer.json."""
    path = Path(path)
    if not is_dcp_checkpoint(path) or not (path / "trainer.json").is_file():
        raise InputError(f"{path}: not a torch.distributed.checkpoint directory (.metadata, trainer.json)")
    if optimizer is not None:
        optimizer.init_state()
    state, copy_back = _state(model, optimizer, par)
    try:
        dcp.load(state, checkpoint_id=str(path))
    except Exception as e:  # DCP names the missing/mismatching key deep in a planner error
        raise InputError(
            f"{path}: cannot load into this model/optimizer: {str(e).splitlines()[0][:500]}"
        ) from e
    with torch.no_grad():
        for live, wrapper in copy_back:
            local = wrapper.to_local()
            if local.data_ptr() != live.data_ptr():
                live.copy_(local)
    if par is not None:
        dist.barrier()
    return json.loads((path / "trainer.json").read_text(encoding="utf-8"))
