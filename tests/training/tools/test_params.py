import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from tests.training.glm_tiny import tiny_model
from training.model.config import mla_256
from training.model.glm import GLMModel
from training.model.mla import MLA
from training.model.moe import MoEBackend, loop_experts, permute, route, unpermute
from training.tools.params import count, load_model_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "config,total,active",
    [("glm5_744b.yaml", 744e9, 40e9), ("glm45_355b.yaml", 355e9, 32e9)],
)
def test_published_sizes_within_2_percent(config, total, active):
    r = count(load_model_config(ROOT / "configs" / config))
    assert abs(r["total_params"] / total - 1) < 0.02, r["total_params"]
    assert abs(r["active_params"] / active - 1) < 0.02, r["active_params"]
    assert (
        r["total_params_with_mtp"] > r["total_params"]
        and r["active_params_with_embeddings"] > r["active_params"]
    )
    assert any("ffn" in a.lower() for a in r["assumptions"]) and any("MTP" in a for a in r["assumptions"])


def real_counts(model: GLMModel):
    """Count from the built module: total (no MTP), active (k of E experts, no embeddings), MTP."""
    total = active = mtp = 0
    k, E = model.cfg.moe_router_topk, model.cfg.num_moe_experts
    for name, p in model.named_parameters():
        if name.startswith("mtp."):
            mtp += p.numel()
            continue
        total += p.numel()
        if name.startswith(("embedding.", "output_layer.")):
            continue
        active += p.numel() * k // E if ".experts." in name else p.numel()
    return total, active, mtp


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"q_lora_rank": None, "mtp_num_layers": 1, "moe_shared_expert_intermediate_size": None},
        {"num_moe_experts": None, "mtp_num_layers": None},
        {
            "multi_latent_attention": False,
            "num_query_groups": 2,
            "kv_channels": 16,
            "add_qkv_bias": True,
            "rotary_percent": 0.5,
        },
    ],
)
def test_calculator_matches_the_built_model(overrides):
    model = GLMModel(tiny_model(vocab_size=97, **overrides))
    r = count(model.cfg)
    assert (r["total_params"], r["active_params"], r["mtp_params"]) == real_counts(model)


@pytest.mark.parametrize("mla", [True, False])
def test_forward_flops_match_a_flop_counter(mla):
    # v as wide as q/k (as in GLM-5), so the attention kernel does no padding the counter would see
    extra = (
        {"v_head_dim": 16}
        if mla
        else {"multi_latent_attention": False, "num_query_groups": 2, "kv_channels": 8}
    )
    cfg = tiny_model(vocab_size=64, mtp_num_layers=None, **extra)
    model = GLMModel(cfg)
    for layer in model.moe_layers():  # plain matmuls, which the counter sees (grouped_mm it does not)
        layer.backend = MoEBackend(route, permute, loop_experts, unpermute)
    L = 24
    tokens = torch.randint(0, 64, (1, L))
    # the math attention kernel (which the counter sees) computes all L x L scores: causal=False
    with FlopCounterMode(display=False) as fc, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        model(tokens, [torch.tensor([L])])
    assert fc.get_total_flops() == count(cfg, L, causal=False)["forward_flops_per_token"] * L


def test_mla256_keeps_parameters_and_training_flops_and_cuts_decode():
    base = load_model_config(ROOT / "configs/glm5_744b.yaml").model_copy(
        update={"num_attention_heads": 96, "qk_head_dim": 128, "v_head_dim": 128}
    )
    variant = mla_256(base)
    assert (variant.num_attention_heads, variant.q_head_dim, variant.v_head_dim) == (64, 256, 192)
    rb, rv = count(base), count(variant)
    assert abs(rv["total_params"] / rb["total_params"] - 1) < 0.01
    assert abs(rv["per_layer"]["attention"] / rb["per_layer"]["attention"] - 1) < 0.05
    # projections keep their FLOPs; the per-head RoPE query slice and the scores of the
    # (fewer) heads shrink a little
    assert abs(rv["flops_per_token"] / rb["flops_per_token"] - 1) < 0.02
    # W_UK, W_UV and the output projection are exactly the same size (real modules, tiny)
    tb = tiny_model(num_attention_heads=6, qk_head_dim=8, v_head_dim=8)
    small, wide = MLA(tb), MLA(mla_256(tb))
    for name in ("linear_kv_up_proj", "linear_proj", "linear_kv_down_proj", "linear_q_down_proj"):
        assert getattr(small, name).weight.numel() == getattr(wide, name).weight.numel(), name
    # decode: per-head 256-dim dot products of fewer heads vs 576-dim absorbed latent
    db, dv = rb["decode_attention_flops_per_cached_token"], rv["decode_attention_flops_per_cached_token"]
    assert dv["per_head_dot_dim"] == 256 and db["absorbed_dot_dim"] == 576
    assert dv["per_head"] < db["absorbed_latent"] / 2
    assert dv["absorbed_latent"] < db["absorbed_latent"]


def test_cli_json_and_help():
    cmd = [
        sys.executable,
        "-m",
        "training.tools.params",
        str(ROOT / "configs/glm5_744b.yaml"),
        "--json",
        "--mla256",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "num_attention_heads 64 must be divisible by 3" in out.stderr
    out = subprocess.run(cmd[:-1], capture_output=True, text=True, cwd=ROOT, check=True)
    r = json.loads(out.stdout)
    expected = count(load_model_config(ROOT / "configs/glm5_744b.yaml"))
    for key in ("total_params", "active_params", "flops_per_token"):
        assert r[key] == expected[key]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "training.tools.params",
            str(ROOT / "configs/train_tiny.yaml"),
            "--mla256",
            "--set",
            "model.vocab_size=8192",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "MLA-256 variant" in out.stdout and "absorbed_latent" in out.stdout
