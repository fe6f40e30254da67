"""Tiny random models of the three architectures, made by transformers itself (no hub), and
the matching tiny configs of ours, for the parity checks (``training.hf.parity``: the tests and
``benchmarks/hf_parity.py``). Norm weights and the router bias are perturbed away from their
initial ones/zeros so a wrong mapping of any of them shows in the logits."""

from __future__ import annotations

import torch

from training.model.config import ModelConfig

VOCAB = 64
SEQ = 12  # > every DSA top-k below: the sparse path selects
TOPK = 4

COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=3,
              num_attention_heads=4, n_routed_experts=8, num_experts_per_tok=2, first_k_dense_replace=1,
              initializer_range=0.2, routed_scaling_factor=2.5, rope_parameters={"rope_type": "default",
              "rope_theta": 10000.0})  # fmt: skip
MLA = dict(num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8)


def hf_config(arch: str, **over):
    from transformers import DeepseekV3Config, Glm4MoeConfig, GlmMoeDsaConfig

    if arch == "glm_moe_dsa":
        # 16 indexer heads: with few heads many keys score exactly 0 (all ReLUs off) and the
        # top-k among equal scores is implementation-defined (see training.hf.config_map)
        return GlmMoeDsaConfig(**{**COMMON, **MLA, "index_topk": TOPK, "index_head_dim": 16, "index_n_heads": 16,
                                  **over})  # fmt: skip
    if arch == "deepseek_v3":  # group-limited routing: 2 groups of 4, top-1 group, top-2 experts
        return DeepseekV3Config(**{**COMMON, **MLA, "n_group": 2, "topk_group": 1, **over})
    return Glm4MoeConfig(**{**COMMON, "num_key_value_heads": 2, "head_dim": 16, "use_qk_norm": True,
                            "attention_bias": True, **over})  # fmt: skip


def hf_model(arch: str, seed: int = 0, **over):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    m = AutoModelForCausalLM.from_config(hf_config(arch, **over)).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)
        for name, b in m.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn_like(b) * 0.1)
    return m


def our_config(arch: str, **over) -> ModelConfig:
    base = dict(num_layers=3, hidden_size=32, ffn_hidden_size=64, num_attention_heads=4, vocab_size=VOCAB,
                num_moe_experts=8, moe_router_topk=2, moe_ffn_hidden_size=16, moe_shared_expert_intermediate_size=16,
                moe_router_topk_scaling_factor=2.5, moe_first_k_dense_layers=1, init_method_std=0.2,
                rotary_base=10000.0, mtp_num_layers=1)  # fmt: skip
    if arch == "glm4_moe":
        base.update(multi_latent_attention=False, num_query_groups=2, kv_channels=16, rotary_percent=0.5,
                    add_qkv_bias=True)  # fmt: skip
    else:
        base.update(q_lora_rank=16, kv_lora_rank=16, qk_head_dim=8, qk_pos_emb_head_dim=8, v_head_dim=8,
                    qk_layernorm_epsilon=1e-6)  # fmt: skip
    if arch == "glm_moe_dsa":
        base.update(dsa_indexer_n_heads=16, dsa_indexer_head_dim=16, dsa_indexer_topk=TOPK,
                    dsa_indexer_layernorm_epsilon=1e-6)  # fmt: skip
    if arch == "deepseek_v3":
        base.update(moe_router_num_groups=2, moe_router_group_topk=1)
    return ModelConfig(**{**base, **over})


def perturb(model: torch.nn.Module, seed: int = 1) -> None:
    """Our freshly initialised model: norms away from 1, biases and the router bias away from 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.2)
        for name, b in model.named_buffers():
            if name.endswith("expert_bias"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
