"""The GLM-5-shaped model's config: one schema with Megatron-core's field names.

The same YAML drives our pure-PyTorch model (the tested path), the parameter/FLOP calculator
and Megatron-core's ``MLATransformerConfig`` (see ``training/tools/megatron_bridge.py``), so every
field that Megatron has is spelled the way Megatron spells it. Fields Megatron lacks are few
and marked (``moe_first_k_dense_layers``, ``moe_backend``, ``moe_router_freeze_expert_bias``;
``mtp_use_repeated_layer`` exists only in megatron-core >= 0.17).

``check()`` catches inconsistent shapes at load time and names the offending field: a config
that would only fail deep inside a forward pass (or silently build a different model) must not
get that far.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config import StrictModel
from core.errors import ConfigError


class ModelConfig(StrictModel):
    # -- sizes -----------------------------------------------------------------------------
    num_layers: int = Field(default=4, gt=0)  # decoder layers, MTP not included
    hidden_size: int = Field(default=128, gt=0)
    ffn_hidden_size: int = Field(default=256, gt=0)  # dense-layer SwiGLU intermediate size
    num_attention_heads: int = Field(default=4, gt=0)
    vocab_size: int = Field(default=0, ge=0)  # 0 = take it from the shard manifest
    untie_embeddings_and_output_weights: bool = True
    normalization: Literal["RMSNorm"] = "RMSNorm"
    layernorm_epsilon: float = Field(default=1e-5, gt=0)
    init_method_std: float = Field(default=0.02, gt=0)

    # -- attention: MLA (multi_latent_attention) or GQA ------------------------------------
    multi_latent_attention: bool = True
    q_lora_rank: int | None = Field(default=64, gt=0)  # None = no query compression
    kv_lora_rank: int = Field(default=32, gt=0)
    qk_head_dim: int = Field(default=32, gt=0)  # per-head q/k dims without RoPE ("nope")
    qk_pos_emb_head_dim: int = Field(default=16, gt=0)  # decoupled RoPE dims (shared key)
    v_head_dim: int = Field(default=32, gt=0)
    qk_layernorm: bool = True  # MLA: RMSNorm on the q and kv latents; GQA: per-head q/k norm
    # ours: eps of those q/k norms; None = layernorm_epsilon (Megatron). DeepSeek-V3 and GLM-5's
    # reference code (transformers) fixes 1e-6 for the MLA latent norms (training/hf/)
    qk_layernorm_epsilon: float | None = Field(default=None, gt=0)
    # GQA only (GLM-4.5): Megatron's names
    num_query_groups: int | None = Field(default=None, gt=0)
    kv_channels: int | None = Field(default=None, gt=0)
    add_qkv_bias: bool = False
    rotary_base: float = Field(default=1_000_000.0, gt=0)
    rotary_percent: float = Field(default=1.0, gt=0, le=1)  # GQA: fraction of head dim rotated
    # DeepSeek sparse attention (DSA, GLM-5 has it; MLA only; Megatron's names): a lightning
    # indexer scores every past token, each query attends to its top dsa_indexer_topk only
    # (training/model/dsa.py). The indexer learns by KL toward the main attention's distribution.
    dsa_indexer_n_heads: int | None = Field(default=None, gt=0)
    dsa_indexer_head_dim: int | None = Field(default=None, gt=0)
    dsa_indexer_topk: int | None = Field(default=None, gt=0)
    dsa_indexer_loss_coeff: float = Field(default=0.0, ge=0)  # Megatron: None = 0
    dsa_indexer_use_sparse_loss: bool = False  # KL over the selected keys only (sparse stage)
    # ours: eps of the indexer key LayerNorm; None = layernorm_epsilon. GLM-5's reference: 1e-6
    dsa_indexer_layernorm_epsilon: float | None = Field(default=None, gt=0)

    # -- MoE --------------------------------------------------------------------------------
    num_moe_experts: int | None = Field(default=8, gt=0)  # None = dense model
    moe_router_topk: int = Field(default=2, gt=0)
    moe_ffn_hidden_size: int | None = Field(default=64, gt=0)
    moe_shared_expert_intermediate_size: int | None = Field(default=64, gt=0)
    moe_router_score_function: Literal["sigmoid", "softmax"] = "sigmoid"
    moe_router_enable_expert_bias: bool = True
    moe_router_bias_update_rate: float = Field(default=1e-3, ge=0)
    moe_router_freeze_expert_bias: bool = False  # ours: keep the bias fixed (e.g. for SFT)
    moe_router_topk_scaling_factor: float | None = Field(default=None, gt=0)
    moe_router_num_groups: int | None = Field(default=None, gt=0)
    moe_router_group_topk: int | None = Field(default=None, gt=0)
    moe_router_load_balancing_type: Literal["none", "seq_aux_loss"] = "none"
    moe_aux_loss_coeff: float = Field(default=0.0, ge=0)
    # int f: every f-th layer is MoE (Megatron); list: one 0/1 per layer
    moe_layer_freq: int | list[int] = 1
    moe_first_k_dense_layers: int = Field(default=0, ge=0)  # ours: the first k layers stay dense
    # kernels with the same signatures plug in here: torch (default, any device) or triton
    # (moe_kernels/: CUDA, or Triton's interpreter on CPU for tests)
    moe_backend: Literal["torch", "triton"] = "torch"

    # -- multi-token prediction ------------------------------------------------------------
    mtp_num_layers: int | None = Field(default=None, ge=0)  # depths; None/0 = no MTP
    mtp_use_repeated_layer: bool = True  # one shared layer applied mtp_num_layers times
    mtp_loss_scaling_factor: float = Field(default=0.1, ge=0)

    # -- derived -----------------------------------------------------------------------------
    @property
    def moe_pattern(self) -> list[bool]:
        """Per decoder layer: True where the layer is MoE."""
        if not self.num_moe_experts:
            return [False] * self.num_layers
        f = self.moe_layer_freq
        pattern = (
            [bool(x) for x in f] if isinstance(f, list) else [i % f == 0 for i in range(self.num_layers)]
        )
        return [False if i < self.moe_first_k_dense_layers else p for i, p in enumerate(pattern)]

    @property
    def mtp_depths(self) -> int:
        return self.mtp_num_layers or 0

    @property
    def q_head_dim(self) -> int:
        return self.qk_head_dim + self.qk_pos_emb_head_dim

    @property
    def qk_norm_eps(self) -> float:
        return self.qk_layernorm_epsilon or self.layernorm_epsilon

    @property
    def gqa_head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    # -- consistency -------------------------------------------------------------------------
    def check(self, where: str = "model") -> ModelConfig:
        """Raise ConfigError naming the first inconsistent field; return self when consistent."""

        def bad(field: str, msg: str) -> ConfigError:
            return ConfigError(f"{where}.{field}: {msg}")

        if self.multi_latent_attention:
            if self.qk_pos_emb_head_dim % 2:
                raise bad("qk_pos_emb_head_dim", f"{self.qk_pos_emb_head_dim} must be even (RoPE pairs)")
        else:
            if self.kv_channels is None and self.hidden_size % self.num_attention_heads:
                raise bad(
                    "num_attention_heads",
                    f"hidden_size {self.hidden_size} is not divisible by {self.num_attention_heads} heads "
                    "(set kv_channels for a head dim other than hidden_size / heads)",
                )
            groups = self.num_query_groups or self.num_attention_heads
            if self.num_attention_heads % groups:
                raise bad(
                    "num_query_groups",
                    f"{groups} does not divide num_attention_heads {self.num_attention_heads}",
                )
            rot = self.gqa_head_dim * self.rotary_percent
            if rot != int(rot) or int(rot) % 2:
                raise bad(
                    "rotary_percent",
                    f"{self.rotary_percent} x head dim {self.gqa_head_dim} is not an even integer",
                )
        if (self.dsa_indexer_n_heads is None) != (self.dsa_indexer_head_dim is None):
            raise bad("dsa_indexer_head_dim", "set dsa_indexer_n_heads and dsa_indexer_head_dim together")
        if self.dsa_indexer_n_heads is not None:
            if self.dsa_indexer_topk is None:
                raise bad("dsa_indexer_topk", "required with dsa_indexer_n_heads (keys kept per query)")
            if self.dsa_indexer_head_dim <= self.qk_pos_emb_head_dim or self.qk_pos_emb_head_dim % 2:
                raise bad(
                    "dsa_indexer_head_dim",
                    f"{self.dsa_indexer_head_dim} must exceed qk_pos_emb_head_dim {self.qk_pos_emb_head_dim} "
                    "(its last qk_pos_emb_head_dim dims carry RoPE)",
                )

        f = self.moe_layer_freq
        if isinstance(f, list):
            if len(f) != self.num_layers:
                raise bad("moe_layer_freq", f"has {len(f)} entries for num_layers={self.num_layers}")
            if any(x not in (0, 1) for x in f):
                raise bad("moe_layer_freq", "list entries must be 0 (dense) or 1 (MoE)")
        elif f <= 0:
            raise bad("moe_layer_freq", f"must be positive, got {f}")
        if self.moe_first_k_dense_layers > self.num_layers:
            raise bad(
                "moe_first_k_dense_layers", f"{self.moe_first_k_dense_layers} > num_layers {self.num_layers}"
            )

        if self.num_moe_experts:
            e, k = self.num_moe_experts, self.moe_router_topk
            if k > e:
                raise bad("moe_router_topk", f"{k} > num_moe_experts {e}")
            if any(self.moe_pattern) and self.moe_ffn_hidden_size is None:
                raise bad("moe_ffn_hidden_size", "required when the model has MoE layers")
            if (self.moe_router_num_groups is None) != (self.moe_router_group_topk is None):
                raise bad(
                    "moe_router_group_topk", "set moe_router_num_groups and moe_router_group_topk together"
                )
            if self.moe_router_num_groups:
                g, gk = self.moe_router_num_groups, self.moe_router_group_topk
                if e % g:
                    raise bad("moe_router_num_groups", f"{g} does not divide num_moe_experts {e}")
                if gk > g:
                    raise bad("moe_router_group_topk", f"{gk} > moe_router_num_groups {g}")
                if k % gk or k // gk > e // g:
                    raise bad(
                        "moe_router_group_topk",
                        f"topk {k} must split evenly over {gk} groups of {e // g} experts",
                    )
            if self.moe_router_load_balancing_type == "seq_aux_loss" and self.moe_aux_loss_coeff == 0:
                raise bad("moe_aux_loss_coeff", "seq_aux_loss needs a positive coefficient")
        if self.mtp_depths and not self.mtp_use_repeated_layer:
            # our model implements the paper's shared-parameter MTP only
            raise bad("mtp_use_repeated_layer", "only the shared-layer MTP (true) is implemented")
        if ignored := self.ignored_fields():
            field, why = ignored[0]
            raise bad(field, f"set to {getattr(self, field)!r} but {why}: the model would ignore it")
        return self

    def ignored_fields(self) -> list[tuple[str, str]]:
        """Fields set to a non-default value that this architecture does not use, with why.

        A YAML that sets a field the model then ignores builds a different model than its
        author meant (e.g. GLM-5's indexer fields before DSA existed), so ``check`` refuses it."""
        # (MoE and MTP sub-fields are not listed: num_moe_experts / mtp_num_layers = null is the
        # explicit switch that turns those parts off, as in Megatron)
        mla_only = ["q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"]
        mla_only += [f for f in type(self).model_fields if f.startswith("dsa_")]
        gqa_only = ["num_query_groups", "kv_channels", "add_qkv_bias", "rotary_percent"]
        groups = [
            (gqa_only, self.multi_latent_attention, "multi_latent_attention is true (GQA-only field)"),
            (mla_only, not self.multi_latent_attention, "multi_latent_attention is false (MLA-only field)"),
            (["qk_layernorm_epsilon"], not self.qk_layernorm, "qk_layernorm is false (no q/k norms)"),
            (
                [f for f in type(self).model_fields if f.startswith("dsa_") and f != "dsa_indexer_n_heads"],
                self.dsa_indexer_n_heads is None,
                "dsa_indexer_n_heads is not set (no DSA indexer)",
            ),
        ]
        out = []
        for fields, unused, why in groups:
            if unused:
                out += [
                    (f, why) for f in fields if getattr(self, f) != type(self).model_fields[f].default
                ]
        return out


def mla_256(base: ModelConfig) -> ModelConfig:
    """The MLA-256 variant of an MLA config: 1/3 fewer heads, each 1.5x wider.

    ``heads x qk_head_dim`` and ``heads x v_head_dim`` are preserved, so W_UK, W_UV and the
    output projection keep their sizes exactly and training FLOPs of the projections barely
    move; only the per-head RoPE slice of the query shrinks with the head count. A base of
    qk 128 + rope 64 (head dim 192) becomes qk 192 + rope 64 = 256. Decoding gets cheaper
    because each of the fewer heads does one 256-dim dot product per cached token instead of
    a 576-dim one over the absorbed latent (see ``training.tools.params``).
    """
    if not base.multi_latent_attention:
        raise ConfigError("mla_256: the base config must use multi_latent_attention")
    h = base.num_attention_heads
    if h % 3 or base.qk_head_dim % 2 or base.v_head_dim % 2:
        raise ConfigError(f"mla_256: num_attention_heads {h} must be divisible by 3 and qk/v head dims by 2")
    return base.model_copy(
        update={
            "num_attention_heads": h * 2 // 3,
            "qk_head_dim": base.qk_head_dim * 3 // 2,
            "v_head_dim": base.v_head_dim * 3 // 2,
        }
    ).check()
