"""Logits equal transformers' own implementations (float32, max abs diff <= 1e-4) for GLM-5
(glm_moe_dsa, DSA top-k below the sequence length), GLM-4.5 (glm4_moe) and DeepSeek-V3, both
ways: transformers' random model saved with save_pretrained -> imported into ours, and our
random model's checkpoint -> exported -> loaded by transformers."""

from __future__ import annotations

import pytest
import torch

from training.hf.convert import export_checkpoint, import_hf, load_model, logits
from training.hf.parity import ARCHS, TOL, export_diff, hf_logits, ids, import_diff, write_ours
from training.hf.tiny import SEQ, TOPK, hf_model, our_config, perturb
from training.model.glm import GLMModel


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_model_imports_with_equal_logits(arch, tmp_path):
    diff = import_diff(arch, tmp_path)
    print(f"{arch} transformers -> ours: max abs diff {diff:.2e}")
    assert diff <= TOL, f"{arch}: max abs diff {diff}"


@pytest.mark.parametrize("arch", ARCHS)
def test_our_export_loads_in_transformers_with_equal_logits(arch, tmp_path):
    # glm4_moe: small shards, so transformers reads an index too
    diff, conf = export_diff(arch, tmp_path, max_shard_bytes=20_000 if arch == "glm4_moe" else 5 * 2**30)
    assert conf["model_type"] == arch
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file() == (arch == "glm4_moe")
    assert (tmp_path / "hf" / "generation_config.json").is_file()
    print(f"{arch} ours -> transformers: max abs diff {diff:.2e}")
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
