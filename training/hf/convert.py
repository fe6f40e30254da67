"""Hugging Face model directories in and out of our checkpoints.

``export_checkpoint``: a checkpoint (``training.trainer --checkpoint-dir``'s directory, or one
``step-*`` in it) -> ``config.json`` (``model_type`` / ``architectures``), ``model.safetensors``
(or ``model-0000i-of-0000n.safetensors`` + ``model.safetensors.index.json`` past ``max_shard_bytes``),
``generation_config.json`` and the checkpoint's tokenizer files, when it has them.
``import_hf``: such a directory (ours, or transformers' ``save_pretrained``) -> a checkpoint
``OUT/step-00000000`` with the same files the trainer writes (weights, a fresh optimizer state,
``trainer.json`` recording the model config), so the trainer resumes from it and RL/serving load
it like any other. Layout and behaviour differences: ``training.hf.config_map``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from core.errors import InputError, UserError
from core.io import atomic_write_text
from training.checkpoint import checkpoint_config, checkpoint_step, load_model, mismatches, save_checkpoint
from training.hf import config_map, weights
from training.model.config import ModelConfig
from training.model.glm import GLMModel

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
EOS_TOKENS = ("<|endoftext|>", "<|user|>", "<|observation|>")  # GLM's stop tokens, when the tokenizer has them
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _tokenizer_dir(step: Path) -> Path | None:
    """The step directory or the checkpoint directory above it, whichever holds a tokenizer."""
    for d in (step, step.parent):
        if (d / "tokenizer.json").is_file():
            return d
    return None


# -- export -------------------------------------------------------------------------------------
def hf_config_json(cfg: ModelConfig, arch: str | None, dtype: str, tok_ids: dict[str, Any]) -> dict[str, Any]:
    """A complete ``config.json``: our fields through transformers' config class (its defaults and
    derived fields, e.g. ``max_position_embeddings``), so transformers reads back what we meant."""
    from transformers import AutoConfig

    fields = config_map.to_hf_config(cfg, arch)
    arch = fields.pop("model_type")
    conf = AutoConfig.for_model(arch, **fields, **tok_ids)
    out = conf.to_dict()
    out["dtype"] = dtype
    return out


def _token_ids(tok_dir: Path | None) -> dict[str, Any]:
    if tok_dir is None:
        return {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    eos = [i for t in EOS_TOKENS if (i := tok.token_to_id(t)) is not None]
    return {"bos_token_id": None, "eos_token_id": eos[0] if len(eos) == 1 else (eos or None),
            "pad_token_id": eos[0] if eos else None}  # fmt: skip


def write_safetensors(tensors: dict[str, torch.Tensor], out: Path, max_shard_bytes: int) -> list[str]:
    """``model.safetensors``, or shards + ``model.safetensors.index.json``; returns the file names."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name in sorted(tensors):
        t = tensors[name]
        n = t.numel() * t.element_size()
        if shards[-1] and size + n > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += n
    meta = {"format": "pt"}
    if len(shards) == 1:
        save_file(shards[0], out / "model.safetensors", metadata=meta)
        return ["model.safetensors"]
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
             "weight_map": {k: f for f, s in zip(names, shards, strict=True) for k in s}}  # fmt: skip
    for f, s in zip(names, shards, strict=True):
        save_file(s, out / f, metadata=meta)
    atomic_write_text(out / "model.safetensors.index.json", json.dumps(index, indent=2))
    return names


def export_checkpoint(
    checkpoint: str | Path,
    out: str | Path,
    arch: str | None = None,
    dtype: str = "float32",
    max_shard_bytes: int = 5 * 2**30,
    log=print,
) -> dict[str, Any]:
    """Write the Hugging Face directory ``out`` for ``checkpoint``; returns the config written."""
    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype!r}: one of {', '.join(DTYPES)}")
    step = checkpoint_step(checkpoint)
    cfg = checkpoint_config(step)
    arch = arch or config_map.default_arch(cfg)
    tok_dir = _tokenizer_dir(step)
    conf = hf_config_json(cfg, arch, dtype, _token_ids(tok_dir))
    sd = load_file(step / "model.safetensors")
    tensors = {k: v.to(DTYPES[dtype]) if v.is_floating_point() else v for k, v in weights.to_hf(cfg, sd, arch).items()}
    # the router and its bias stay float32, as transformers keeps them (_keep_in_fp32_modules_strict)
    for k in [k for k in tensors if k.endswith(("mlp.gate.weight", "e_score_correction_bias"))]:
        tensors[k] = tensors[k].float()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = write_safetensors(tensors, out, max_shard_bytes)
    atomic_write_text(out / "config.json", json.dumps(conf, indent=2, sort_keys=True))
    gen = {"_from_model_config": True, **{k: conf.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}}
    atomic_write_text(out / "generation_config.json", json.dumps(gen, indent=2))
    copied = [f for f in TOKENIZER_FILES if tok_dir is not None and (tok_dir / f).is_file()]
    for f in copied:
        shutil.copy(tok_dir / f, out / f)
    if tok_dir is not None and not (out / "tokenizer_config.json").exists():
        # transformers' AutoTokenizer needs to know which class reads tokenizer.json
        eos = EOS_TOKENS[0] if conf.get("eos_token_id") is not None else None
        tc = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos}
        atomic_write_text(out / "tokenizer_config.json", json.dumps(tc, indent=2))
    for w in config_map.export_warnings(cfg, arch):
        log(f"warning: {w}")
    log(f"exported {step} as {arch} ({len(tensors)} tensors, {dtype}) -> {out}: {', '.join(files)}"
        f"{'; tokenizer ' + ', '.join(copied) if copied else '; no tokenizer in the checkpoint'}")  # fmt: skip
    return conf


# -- import -------------------------------------------------------------------------------------
def read_hf_tensors(hf_dir: Path) -> dict[str, torch.Tensor]:
    index = hf_dir / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    elif (hf_dir / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise InputError(f"{hf_dir}: no model.safetensors or model.safetensors.index.json")
    out: dict[str, torch.Tensor] = {}
    for f in files:
        if not (hf_dir / f).is_file():
            raise InputError(f"{hf_dir}: the index lists {f}, which is missing")
        with safe_open(str(hf_dir / f), "pt") as st:
            for k in st.keys():  # noqa: SIM118 (safe_open is not a dict)
                out[k] = st.get_tensor(k)
    return out


def hf_model_config(hf_dir: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor], ModelConfig]:
    path = hf_dir / "config.json"
    if not path.is_file():
        raise InputError(f"{hf_dir}: no config.json")
    hf = json.loads(path.read_text(encoding="utf-8"))
    tensors = read_hf_tensors(hf_dir)
    cfg = config_map.from_hf_config(hf, weights.has_mtp_weights(set(tensors), hf["num_hidden_layers"]))
    return hf, tensors, cfg


def import_hf(hf_dir: str | Path, out: str | Path, log=print) -> Path:
    """Write ``out/step-00000000`` from the Hugging Face directory ``hf_dir``; returns its path."""
    from training.optim.optimizers import build_optimizer
    from training.train_config import TrainerConfig

    hf_dir = Path(hf_dir)
    hf, tensors, cfg = hf_model_config(hf_dir)
    sd, notes = weights.from_hf(cfg, tensors, hf)
    model = GLMModel(cfg)
    bad = mismatches(model.state_dict(), sd)
    if bad:
        raise UserError(f"{hf_dir}: converted weights do not fit the model: {'; '.join(bad[:10])}")
    model.load_state_dict(sd)
    tcfg = TrainerConfig(model=cfg)
    opt = build_optimizer(model, tcfg.optimizer)  # a fresh state: training starts at step 0
    state = {"loader": None, "config": tcfg.model_dump(mode="json"),
             "hf_import": {"from": str(hf_dir.resolve()), "model_type": hf["model_type"]}}  # fmt: skip
    step = save_checkpoint(out, 0, model, opt, state)
    copied = [f for f in TOKENIZER_FILES if (hf_dir / f).is_file()]
    for f in copied:
        shutil.copy(hf_dir / f, step / f)
    for n in notes:
        log(f"note: {n}")
    log(f"imported {hf_dir} ({hf['model_type']}, {len(sd)} tensors) -> {step}"
        f"{'; tokenizer ' + ', '.join(copied) if copied else ''}")  # fmt: skip
    return step


# -- logits ---------------------------------------------------------------------------------------
@torch.no_grad()
def logits(checkpoint: str | Path, ids: list[int]) -> torch.Tensor:
    """float32 logits [len(ids), vocab] of one sequence (the main model; no MTP)."""
    model, _ = load_model(checkpoint)
    vocab = model.cfg.vocab_size
    if not ids:
        raise UserError("--input-ids: the list is empty")
    if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab for i in ids):
        raise UserError(f"--input-ids: every id must be an integer in [0, {vocab})")
    tokens = torch.tensor([ids], dtype=torch.long)
    return model(tokens, [torch.tensor([len(ids)])])[0].float()
