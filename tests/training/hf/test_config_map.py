"""What cannot travel is refused with the reason, never converted into a different model."""

from __future__ import annotations

import pytest

from core.errors import UserError
from training.hf import config_map
from training.hf.tiny import hf_config, our_config


@pytest.mark.parametrize(
    "arch,over,arch_to,msg",
    [
        ("glm_moe_dsa", {"moe_router_score_function": "softmax", "moe_router_enable_expert_bias": False},
         None, "sigmoid"),
        ("deepseek_v3", {"moe_router_num_groups": 2, "moe_router_group_topk": 2}, None, "top-2"),
        ("deepseek_v3", {}, "glm_moe_dsa", "DSA indexer"),
        ("glm4_moe", {}, "deepseek_v3", "multi-latent"),
        ("deepseek_v3", {"moe_layer_freq": [0, 1, 0], "moe_first_k_dense_layers": 0}, None, "dense-first"),
    ],
)  # fmt: skip
def test_export_refuses_what_transformers_would_run_differently(arch, over, arch_to, msg):
    with pytest.raises(UserError, match=msg):
        config_map.to_hf_config(our_config(arch, **over), arch_to)


def test_glm_moe_dsa_takes_any_moe_pattern():
    cfg = our_config("glm_moe_dsa", moe_layer_freq=[0, 1, 0], moe_first_k_dense_layers=0)
    assert config_map.to_hf_config(cfg)["mlp_layer_types"] == ["dense", "sparse", "dense"]
    back = config_map.from_hf_config(hf_config("glm_moe_dsa", mlp_layer_types=["dense", "sparse", "dense"]).to_dict())
    assert back.moe_pattern == [False, True, False]


@pytest.mark.parametrize(
    "arch,over,msg",
    [
        ("deepseek_v3", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                             "original_max_position_embeddings": 64}}, "rope_type"),
        ("deepseek_v3", {"norm_topk_prob": False}, "norm_topk_prob"),
        ("deepseek_v3", {"n_group": 4, "topk_group": 2, "num_experts_per_tok": 2}, "top-2"),
        ("glm_moe_dsa", {"hidden_act": "gelu"}, "hidden_act"),
    ],
)  # fmt: skip
def test_import_refuses_what_ours_cannot_run(arch, over, msg):
    with pytest.raises(UserError, match=msg):
        config_map.from_hf_config(hf_config(arch, **over).to_dict())


def test_export_names_the_differences_it_keeps():
    cfg = our_config("glm_moe_dsa", qk_layernorm_epsilon=None, dsa_indexer_layernorm_epsilon=None, mtp_num_layers=2)
    warnings = " | ".join(config_map.export_warnings(cfg, "glm_moe_dsa"))
    assert "latent norms" in warnings and "k_norm" in warnings and "applied 2 times" in warnings
    assert config_map.export_warnings(our_config("glm_moe_dsa", mtp_num_layers=1), "glm_moe_dsa") == []
