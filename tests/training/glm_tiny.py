"""Tiny GLM-5-shaped configs for tests: every feature on, shapes small enough for 2 CPU cores."""

from __future__ import annotations

from training.model.config import ModelConfig
from training.train_config import TrainerConfig


def tiny_model(**overrides) -> ModelConfig:
    base = dict(
        num_layers=3,
        hidden_size=32,
        ffn_hidden_size=64,
        num_attention_heads=4,
        q_lora_rank=16,
        kv_lora_rank=16,
        qk_head_dim=8,
        qk_pos_emb_head_dim=8,
        v_head_dim=8,
        num_moe_experts=4,
        moe_router_topk=2,
        moe_ffn_hidden_size=16,
        moe_shared_expert_intermediate_size=16,
        moe_router_topk_scaling_factor=2.5,
        moe_first_k_dense_layers=1,
        mtp_num_layers=2,
    )
    if overrides.get("multi_latent_attention") is False:  # GQA: MLA-only fields would be refused
        for key in ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"):
            base.pop(key)
    return ModelConfig(**{**base, **overrides})


def tiny_trainer(steps: int = 6, **model_overrides) -> TrainerConfig:
    return TrainerConfig.model_validate(
        {
            "steps": steps,
            # one thread: tiny matmuls gain nothing from more, and shared CI cores lose a lot
            "threads": 1,
            "loader": {"batch_size": 4, "seed": 0},
            "model": tiny_model(**model_overrides).model_dump(),
            "optimizer": {"name": "muon_split", "lr": 1e-2},
            "schedule": {"kind": "cosine", "warmup_steps": 2},
        }
    )
