"""Logits equal transformers' own implementations (float32, max abs diff <= 1e-4) for GLM-5
(glm_moe_dsa, DSA top-k below the sequence length), GLM-4.5 (glm4_moe) and DeepSeek-V3, both
ways: transformers' random model saved with save_pretrained -> imported into ours, and our
random model's checkpoint -> exported -> loaded by transformers."""

from __future__ import annotations

import pytest
import torch

from tests.training.hf.hf_tiny import SEQ, TOPK, VOCAB, hf_model, our_config, perturb
from training.checkpoint import save_checkpoint
from training.hf.convert import export_checkpoint, import_hf, load_model, logits
from training.model.glm import GLMModel
from training.optim.optimizers import build_optimizer
from training.train_config import TrainerConfig

ARCHS = ["glm_moe_dsa", "glm4_moe", "deepseek_v3"]
TOL = 1e-4


def ids(seed: int = 0) -> list[int]:
    return torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def hf_logits(model, tokens: list[int]) -> torch.Tensor:
    return model(torch.tensor([tokens])).logits[0].float()


def write_ours(model: GLMModel, root) -> None:
    """A checkpoint exactly as the trainer writes it (weights, optimizer state, trainer.json)."""
    tcfg = TrainerConfig(model=model.cfg)
    save_checkpoint(root, 3, model, build_optimizer(model, tcfg.optimizer),
                    {"loader": None, "config": tcfg.model_dump(mode="json")})  # fmt: skip


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_model_imports_with_equal_logits(arch, tmp_path):
    hf = hf_model(arch)
    hf.save_pretrained(tmp_path / "hf")
    import_hf(tmp_path / "hf", tmp_path / "ckpt", log=lambda _m: None)
    for seed in range(3):
        x = ids(seed)
        diff = (logits(tmp_path / "ckpt", x) - hf_logits(hf, x)).abs().max().item()
        print(f"{arch} transformers -> ours, seq {seed}: max abs diff {diff:.2e}")
        assert diff <= TOL, f"{arch}: max abs diff {diff}"


@pytest.mark.parametrize("arch", ARCHS)
def test_our_export_loads_in_transformers_with_equal_logits(arch, tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    ours = GLMModel(our_config(arch))
    perturb(ours)
    write_ours(ours, tmp_path / "ckpt")
    # glm4_moe: small shards, so transformers reads an index too
    shard = 20_000 if arch == "glm4_moe" else 5 * 2**30
    conf = export_checkpoint(tmp_path / "ckpt", tmp_path / "hf", max_shard_bytes=shard, log=lambda _m: None)
    assert conf["model_type"] == arch
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file() == (arch == "glm4_moe")
    assert (tmp_path / "hf" / "generation_config.json").is_file()
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == conf["architectures"][0]
    ours.eval()
    for seed in range(3):
        x = ids(seed)
        with torch.no_grad():
            mine = ours(torch.tensor([x]), [torch.tensor([SEQ])])[0]
        diff = (mine - hf_logits(hf, x)).abs().max().item()
        print(f"{arch} ours -> transformers, seq {seed}: max abs diff {diff:.2e}")
        assert diff <= TOL, f"{arch}: max abs diff {diff}"


def test_dsa_sparse_path_is_what_is_compared(tmp_path):
    """The glm_moe_dsa comparison above would also pass with dense attention if top-k never
    bit: the same weights with top-k >= the sequence give clearly different logits."""
    hf = hf_model("glm_moe_dsa")
    dense = hf_model("glm_moe_dsa", index_topk=SEQ)
    dense.load_state_dict(hf.state_dict())
    x = ids(0)
    assert TOPK < SEQ
    assert (hf_logits(hf, x) - hf_logits(dense, x)).abs().max().item() > 100 * TOL


@pytest.mark.parametrize(
    "arch,over",
    [("deepseek_v3", {"rope_interleave": False}), ("deepseek_v3", {"q_lora_rank": None}),
     ("glm4_moe", {"use_qk_norm": False, "attention_bias": False, "partial_rotary_factor": 1.0})],
)  # fmt: skip
def test_layout_variants_import(arch, over, tmp_path):
    """Half-split RoPE (rope rows permuted on import), no query compression, plain GQA."""
    hf = hf_model(arch, **over)
    hf.save_pretrained(tmp_path / "hf")
    import_hf(tmp_path / "hf", tmp_path / "ckpt", log=lambda _m: None)
    x = ids(1)
    diff = (logits(tmp_path / "ckpt", x) - hf_logits(hf, x)).abs().max().item()
    assert diff <= TOL, f"{arch} {over}: max abs diff {diff}"


def test_export_import_round_trip_keeps_every_tensor(tmp_path):
    """MTP weights travel as the NextN layer (transformers ignores it, we read it back)."""
    torch.manual_seed(0)
    ours = GLMModel(our_config("glm_moe_dsa"))
    perturb(ours)
    write_ours(ours, tmp_path / "a")
    export_checkpoint(tmp_path / "a", tmp_path / "hf", log=lambda _m: None)
    import_hf(tmp_path / "hf", tmp_path / "b", log=lambda _m: None)
    back, _ = load_model(tmp_path / "b")
    assert back.cfg.mtp_num_layers == 1
    want = ours.state_dict()
    got = back.state_dict()
    assert set(got) == set(want)
    for k, v in want.items():
        assert torch.equal(got[k], v), k
