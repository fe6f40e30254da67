import dataclasses
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError
from training.tools.megatron_bridge import to_megatron_config
from training.train_config import load_trainer_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ["glm5_744b.yaml", "glm45_355b.yaml", "train_tiny.yaml"]


@pytest.mark.parametrize("name", CONFIGS)
def test_configs_convert_to_megatron_on_cpu(name):
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    cfg = load_trainer_config(ROOT / "configs" / name).model
    m = to_megatron_config(cfg.model_copy(update={"vocab_size": cfg.vocab_size or 1000}))
    assert isinstance(m, MLATransformerConfig) == cfg.multi_latent_attention
    assert isinstance(m, TransformerConfig)
    assert (m.num_layers, m.hidden_size, m.num_attention_heads) == (
        cfg.num_layers,
        cfg.hidden_size,
        cfg.num_attention_heads,
    )
    assert m.moe_layer_freq == [int(x) for x in cfg.moe_pattern]
    assert m.num_moe_experts == cfg.num_moe_experts and m.moe_router_topk == cfg.moe_router_topk
    assert m.moe_router_score_function == "sigmoid" and m.moe_router_enable_expert_bias
    assert m.moe_router_topk_scaling_factor == cfg.moe_router_topk_scaling_factor
    assert m.mtp_num_layers == cfg.mtp_num_layers and m.gated_linear_unit
    if cfg.multi_latent_attention:
        assert (m.q_lora_rank, m.kv_lora_rank, m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim) == (
            cfg.q_lora_rank,
            cfg.kv_lora_rank,
            cfg.qk_head_dim,
            cfg.qk_pos_emb_head_dim,
            cfg.v_head_dim,
        )
    else:
        assert (m.num_query_groups, m.kv_channels, m.add_qkv_bias) == (8, 128, True)
    # megatron-core 0.16 lacks the field: it is kept in our schema, passed only where it exists
    has_field = "mtp_use_repeated_layer" in {f.name for f in dataclasses.fields(type(m))}
    assert has_field == hasattr(m, "mtp_use_repeated_layer")


def test_glm5_layer_pattern():
    cfg = load_trainer_config(ROOT / "configs/glm5_744b.yaml").model
    assert cfg.moe_pattern == [False] * 3 + [True] * 75


BAD = [
    ({"moe_router_topk": 9}, "model.moe_router_topk"),
    ({"qk_pos_emb_head_dim": 15}, "model.qk_pos_emb_head_dim"),
    ({"moe_layer_freq": [0, 1, 1]}, "model.moe_layer_freq"),
    ({"moe_router_num_groups": 3, "moe_router_group_topk": 1}, "model.moe_router_num_groups"),
    (
        {"moe_router_num_groups": 4, "moe_router_group_topk": 2, "moe_router_topk": 3},
        "model.moe_router_group_topk",
    ),
    ({"moe_router_num_groups": 2}, "model.moe_router_group_topk"),
    ({"dsa_indexer_n_heads": 4}, "model.dsa_indexer_head_dim"),
    ({"moe_router_load_balancing_type": "seq_aux_loss"}, "model.moe_aux_loss_coeff"),
    ({"multi_latent_attention": False, "num_attention_heads": 6}, "model.num_attention_heads"),
    ({"multi_latent_attention": False, "kv_channels": 16, "num_query_groups": 4}, "model.num_query_groups"),
    ({"mtp_num_layers": 1, "mtp_use_repeated_layer": False}, "model.mtp_use_repeated_layer"),
    ({"moe_first_k_dense_layers": 9}, "model.moe_first_k_dense_layers"),
]


@pytest.mark.parametrize("change,field", BAD)
def test_inconsistent_config_fails_at_load_naming_the_field(tmp_path, change, field):
    data = yaml.safe_load((ROOT / "configs/train_tiny.yaml").read_text())
    data["model"].update(change)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_trainer_config(path)
    msg = str(err.value)
    assert field in msg and str(path) in msg and "\n" not in msg


def test_typo_and_bad_type_are_named(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("model:\n  num_moe_expert: 8\n")
    with pytest.raises(ConfigError, match="unknown key 'model.num_moe_expert'"):
        load_trainer_config(path)
    path.write_text("model:\n  moe_router_score_function: relu\n")
    with pytest.raises(ConfigError, match="model.moe_router_score_function"):
        load_trainer_config(path)
