"""Logits of our model against transformers' own implementation of an architecture, both ways, on
the tiny random models of ``training.hf.tiny`` (float32; DSA's top-k below the sequence length so
the sparse path is what is compared):

* ``import_diff``: transformers' random model saved with ``save_pretrained``, imported into ours
  (``training.hf import``), our logits against its;
* ``export_diff``: our random model's checkpoint, exactly as the trainer writes it, exported
  (``training.hf export``) and loaded by ``AutoModelForCausalLM``, its logits against ours.

Each returns the largest absolute logit difference over ``seqs`` random sequences. The tests in
``tests/training/hf/test_parity.py`` hold them to ``TOL``; ``benchmarks/hf_parity.py`` records them.
"""

from __future__ import annotations

from pathlib import Path

import torch

from training.checkpoint import save_checkpoint
from training.hf.convert import export_checkpoint, import_hf, logits
from training.hf.tiny import SEQ, VOCAB, hf_model, our_config, perturb
from training.model.glm import GLMModel
from training.optim.optimizers import build_optimizer
from training.train_config import TrainerConfig

ARCHS = ("glm_moe_dsa", "glm4_moe", "deepseek_v3")
TOL = 1e-4  # the bound on the max abs difference in float32


def ids(seed: int = 0) -> list[int]:
    return torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def hf_logits(model, tokens: list[int]) -> torch.Tensor:
    return model(torch.tensor([tokens])).logits[0].float()


def write_ours(model: GLMModel, root: Path) -> None:
    """A checkpoint exactly as the trainer writes it (weights, optimizer state, trainer.json)."""
    tcfg = TrainerConfig(model=model.cfg)
    save_checkpoint(root, 3, model, build_optimizer(model, tcfg.optimizer),
                    {"loader": None, "config": tcfg.model_dump(mode="json")})  # fmt: skip


def import_diff(arch: str, work: Path, seqs: int = 3, **over) -> float:
    hf = hf_model(arch, **over)
    hf.save_pretrained(work / "hf")
    import_hf(work / "hf", work / "ckpt", log=lambda _m: None)
    return max((logits(work / "ckpt", ids(s)) - hf_logits(hf, ids(s))).abs().max().item() for s in range(seqs))


def export_diff(arch: str, work: Path, seqs: int = 3, max_shard_bytes: int = 5 * 2**30) -> tuple[float, dict]:
    """(max abs difference, the exported ``config.json``)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    ours = GLMModel(our_config(arch))
    perturb(ours)
    write_ours(ours, work / "ckpt")
    conf = export_checkpoint(work / "ckpt", work / "hf", max_shard_bytes=max_shard_bytes, log=lambda _m: None)
    hf = AutoModelForCausalLM.from_pretrained(work / "hf").eval()
    if type(hf).__name__ != conf["architectures"][0]:
        raise AssertionError(f"{arch}: transformers loaded {type(hf).__name__}, config.json says {conf['architectures']}")
    ours.eval()
    worst = 0.0
    with torch.no_grad():
        for s in range(seqs):
            x = ids(s)
            worst = max(worst, (ours(torch.tensor([x]), [torch.tensor([SEQ])])[0] - hf_logits(hf, x)).abs().max().item())
    return worst, conf
