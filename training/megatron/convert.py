"""Checkpoints between the two trainers: Megatron dist checkpoint <-> ours (-> Hugging Face).

``to_ours``: a Megatron dist checkpoint (what ``python -m training.megatron --checkpoint-dir``
writes, from any TP/PP/EP layout) -> ``OUT/step-00000000`` in our format (what
``training.trainer`` writes: ``model.safetensors``, ``optimizer.pt``, ``trainer.json``), which
``training.hf export`` turns into a Hugging Face directory and RL, SFT and serving load. The
tensor-parallel slices are gathered by Megatron's own loader: the checkpoint is loaded into a
one-rank ``GPTModel`` (``dist_checkpointing`` reshards, its factories rejoin SwiGLU's gate and
up halves), then ``megatron_bridge.from_megatron_state_dict`` renames back to ours.

``to_megatron``: ours (or a ``training.hf import``-ed checkpoint) -> a weights-only Megatron dist
checkpoint ``OUT/step-00000000`` that ``python -m training.megatron --checkpoint-dir OUT
--resume`` (any TP layout: Megatron reshards on load) or ``--init-from`` starts from.

Optimizer state does not travel: Megatron's ``FP32Optimizer`` state and ours differ in layout
(per-expert vs stacked parameters, Muon groups) and a converted checkpoint is a starting point,
as ``training.hf import``'s is: step 0, a fresh optimizer, the loader at its start; the source's
path and step are recorded under ``converted_from``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError
from training.checkpoint import save_checkpoint
from training.megatron import checkpoint as megatron_checkpoint
from training.megatron.sources import recorded_config, resolve
from training.model.config import ModelConfig


@contextlib.contextmanager
def one_rank() -> Iterator[None]:
    """Megatron's parallel state on a gloo world of one CPU rank (conversion needs no more)."""
    from training.megatron.cpu import cpu_stand_ins
    from training.megatron.world import World
    from training.train_config import TrainerConfig

    with cpu_stand_ins():
        world = World(TrainerConfig(), cpu=True)
        try:
            yield
        finally:
            world.close()


def _megatron_model(cfg: ModelConfig):
    from training.tools.megatron_bridge import build_megatron_model

    # the trainer's layout (local spec, SequentialMLP experts); initial values are overwritten
    return build_megatron_model(cfg, use_cpu_initialization=True, moe_token_dispatcher_type="allgather")


def _trainer_config(config: dict[str, Any]):
    from training.train_config import TrainerConfig

    keep = {k: v for k, v in config.items() if k in TrainerConfig.model_fields}
    return TrainerConfig.model_validate(keep)


def to_ours(src: str | Path, out: str | Path, log=print) -> Path:
    """Megatron dist checkpoint ``src`` -> our checkpoint ``out/step-00000000``; returns its path."""
    from training.model.glm import GLMModel
    from training.optim.optimizers import build_optimizer
    from training.tools.megatron_bridge import from_megatron_state_dict

    kind, step = resolve(src)
    if kind != "megatron":
        raise InputError(f"{src}: already our checkpoint format (convert --to megatron goes the other way)")
    tcfg = _trainer_config(recorded_config(kind, step))
    cfg = tcfg.model.check(f"{step}: config.model")
    with one_rank():
        meg = _megatron_model(cfg)
        state = megatron_checkpoint.load_weights(step, [meg])
        meg_sd = {k: v for k, v in meg.state_dict().items() if not k.endswith("_extra_state")}
    model = GLMModel(cfg)
    model.load_state_dict(from_megatron_state_dict(cfg, meg_sd, list(model.state_dict()), "local"))
    extra = {"loader": None, "config": tcfg.model_dump(mode="json"),
             "converted_from": {"format": "megatron", "path": str(step.resolve()), "step": state.get("step")}}  # fmt: skip
    written = save_checkpoint(out, 0, model, build_optimizer(model, tcfg.optimizer), extra)
    log(f"converted Megatron checkpoint {step} (step {state.get('step')}) -> {written}")
    return written


def to_megatron(src: str | Path, out: str | Path, log=print) -> Path:
    """Our checkpoint ``src`` -> a weights-only Megatron dist checkpoint ``out/step-00000000``."""
    from training.checkpoint import load_model
    from training.megatron.weights import load_our_weights

    kind, step = resolve(src)
    if kind != "ours":
        raise InputError(f"{src}: already a Megatron checkpoint (convert --to ours goes the other way)")
    config = recorded_config(kind, step)
    model, _ = load_model(step)
    tcfg = _trainer_config({**config, "model": model.cfg.model_dump(mode="json")})
    with one_rank():
        meg = _megatron_model(model.cfg)
        load_our_weights(meg, model.cfg, model.state_dict())
        source_step = json.loads((step / "trainer.json").read_text(encoding="utf-8")).get("step")
        extra = {"loader": None, "config": tcfg.model_dump(mode="json"),
                 "converted_from": {"format": "ours", "path": str(step.resolve()), "step": source_step}}  # fmt: skip
        written = megatron_checkpoint.save(out, 0, [meg], None, extra)
    log(f"converted our checkpoint {step} (step {source_step}) -> {written} (weights only)")
    return written
