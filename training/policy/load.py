"""Where a policy comes from: a checkpoint directory of either kind, a ``model:`` section, or a
bare ``GLMModel`` handed in by older code.

One rule tells the kinds apart (``checkpoint_kind``): a directory with ``config.json`` is a
Hugging Face model directory (what ``save_pretrained``, ``training.hf export``, SFT's ``OUT/hf``
and an HF policy's checkpoints are); one with ``model.safetensors`` and ``trainer.json`` is ours;
otherwise its latest ``step-*`` is meant. So every stage hands the next one a path and nothing
else: ``load_policy(path)`` gives back the model with its tokenizer and chat template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import model_validator

from core.config import StrictModel
from core.errors import InputError
from training.checkpoint import latest_checkpoint
from training.model.config import ModelConfig
from training.policy.base import Policy

SMOLLM2 = "smollm2"  # `hf: smollm2`: SmolLM2-135M-Instruct from the user cache (core.local_lm)


class PolicySource(StrictModel):
    """``model: {hf: PATH}`` or ``model: {checkpoint: PATH}``: start from existing weights."""

    hf: str | None = None  # a transformers causal LM directory (AutoModelForCausalLM), or `smollm2`
    checkpoint: str | None = None  # ours or HF: a step directory, or a directory of step-*
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # HF models only

    @model_validator(mode="after")
    def _one(self) -> PolicySource:
        if (self.hf is None) == (self.checkpoint is None):
            raise ValueError("model: give exactly one of hf (a Hugging Face directory) or checkpoint")
        return self

    @property
    def path(self) -> str:
        if self.hf == SMOLLM2:  # the one model the project ships (obtained once, as every job does)
            from core.local_lm import obtain_smollm2

            return str(obtain_smollm2(log=lambda _m: None))
        return self.hf or self.checkpoint or ""


def checkpoint_kind(path: str | Path) -> tuple[Literal["hf", "glm"], Path]:
    """(kind, directory to load) of a checkpoint path; see the module docstring."""
    p = Path(path)
    if (p / "config.json").is_file():
        return "hf", p
    if (p / "model.safetensors").is_file() and (p / "trainer.json").is_file():
        return "glm", p
    found = latest_checkpoint(p)
    if found is None:
        raise InputError(f"{p}: no checkpoint (no config.json, model.safetensors + trainer.json or step-*)")
    return checkpoint_kind(found)


def load_policy(source: str | Path | PolicySource, dtype: str = "float32") -> Policy:
    """The policy a checkpoint path (either kind) or a ``PolicySource`` names."""
    if isinstance(source, PolicySource):
        dtype, source = source.dtype, source.path
    kind, path = checkpoint_kind(source)
    if kind == "hf":
        from training.policy.hf import HFPolicy

        return HFPolicy.load(path, dtype)
    from training.policy.glm import GLMPolicy

    return GLMPolicy.load(path)


def load_codec(source: str | Path, tokenizer: str | Path | None = None):
    """The chat codec of a checkpoint without loading its weights (the orchestrator renders prompts
    with it); ``tokenizer``: a ``tokenizer.json`` for our model instead of the checkpoint's."""
    from training.policy.codec import Codec

    if tokenizer:
        return Codec.load(tokenizer)
    kind, path = checkpoint_kind(source)
    if kind == "hf":
        from training.policy.hf import HFCodec

        return HFCodec.load(path)
    tok = next((d / "tokenizer.json" for d in (path, path.parent) if (d / "tokenizer.json").is_file()), None)
    if tok is None:
        raise InputError(f"{path}: no tokenizer.json beside the weights")
    return Codec.load(tok)


def build_policy(spec: ModelConfig | PolicySource, seed: int = 0) -> Policy:
    """A ``model:`` section: existing weights, or our model from scratch (no tokenizer)."""
    if isinstance(spec, PolicySource):
        return load_policy(spec)
    from training.policy.glm import GLMPolicy

    return GLMPolicy.new(spec, seed)


def as_policy(model) -> Policy:
    """A policy, or our bare ``GLMModel`` wrapped as one (the sampler's and update's callers)."""
    if isinstance(model, Policy):
        return model
    from training.policy.glm import GLMPolicy

    return GLMPolicy(model)
