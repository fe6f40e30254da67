"""Megatron-core side of the shared config: ``MLATransformerConfig``, ``GPTModel`` names, CUDA build.

``to_megatron_config`` turns our ``ModelConfig`` into Megatron-core's config dataclass (builds on
CPU; tested). ``to_megatron_state_dict`` renames our state dict to a Megatron ``GPTModel``'s
(Transformer-Engine layer specs by default, where q/kv and dense-MLP norms are fused into the
following linear as ``layer_norm_weight``; ``spec="local"`` for the plain-PyTorch specs).
``build_megatron_model`` builds the GPTModel itself: with ``spec="local"`` from Megatron's own
modules plus the few pieces 0.16.1 lacks without Transformer Engine (``training/tools/megatron_local.py``
says which); ``tests/training/tools/test_megatron_bridge.py`` loads a converted state dict and
compares logits with ours (on CPU), ``make gpu-check`` does the same on a GPU.

DSA (``dsa_indexer_*``) maps to Megatron's ``experimental_attention_variant="dsa"`` with the
same field names, and our ``self_attention.indexer.*`` weights to its
``self_attention.core_attention.indexer.*``. Megatron-core 0.16.1 builds it only through the
local path here: its block spec does not wire "dsa", and its TE DSA spec fuses the q norm into
``linear_q_up_proj``, so its indexer would read the pre-norm query latent (ours and
DeepSeek-V3.2's read the normalized one). Megatron's DSA has no packed-sequence (document
mask) support and no dense warm-up switch; its indexer loss is the same KL
(``dsa_indexer_loss_coeff``, ``dsa_indexer_use_sparse_loss``).

megatron-core 0.16 has no ``mtp_use_repeated_layer`` (0.17+): there the one shared MTP layer is
written once per depth (``mtp.layers.{d}``), i.e. Megatron trains them as copies.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

import torch
import torch.nn.functional as F

from training.model.config import ModelConfig

Spec = Literal["te", "local"]


def megatron_fields(cfg: ModelConfig) -> dict[str, Any]:
    """Our config as keyword arguments for Megatron's (MLA)TransformerConfig."""
    c = cfg.check()
    kw: dict[str, Any] = {
        "num_layers": c.num_layers,
        "hidden_size": c.hidden_size,
        "ffn_hidden_size": c.ffn_hidden_size,
        "num_attention_heads": c.num_attention_heads,
        "normalization": c.normalization,
        "layernorm_epsilon": c.layernorm_epsilon,
        "init_method_std": c.init_method_std,
        "gated_linear_unit": True,
        "activation_func": F.silu,
        "add_bias_linear": False,
        "add_qkv_bias": c.add_qkv_bias,
        "qk_layernorm": c.qk_layernorm,
        "multi_latent_attention": c.multi_latent_attention,
        # our model has no dropout; Megatron's defaults (0.1 each) would make training differ
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }
    if c.multi_latent_attention:
        kw.update(
            q_lora_rank=c.q_lora_rank,
            kv_lora_rank=c.kv_lora_rank,
            qk_head_dim=c.qk_head_dim,
            qk_pos_emb_head_dim=c.qk_pos_emb_head_dim,
            v_head_dim=c.v_head_dim,
            rope_type="rope",
            rotary_base=c.rotary_base,
        )
    else:
        kw.update(num_query_groups=c.num_query_groups, kv_channels=c.kv_channels)
    if c.num_moe_experts and any(c.moe_pattern):
        kw.update(
            num_moe_experts=c.num_moe_experts,
            moe_layer_freq=[int(x) for x in c.moe_pattern],
            moe_ffn_hidden_size=c.moe_ffn_hidden_size,
            moe_shared_expert_intermediate_size=c.moe_shared_expert_intermediate_size,
            moe_router_topk=c.moe_router_topk,
            moe_router_score_function=c.moe_router_score_function,
            moe_router_enable_expert_bias=c.moe_router_enable_expert_bias,
            moe_router_bias_update_rate=0.0
            if c.moe_router_freeze_expert_bias
            else c.moe_router_bias_update_rate,
            moe_router_topk_scaling_factor=c.moe_router_topk_scaling_factor,
            moe_router_num_groups=c.moe_router_num_groups,
            moe_router_group_topk=c.moe_router_group_topk,
            moe_router_load_balancing_type=c.moe_router_load_balancing_type,
            moe_aux_loss_coeff=c.moe_aux_loss_coeff,
            moe_router_dtype="fp32",
            moe_grouped_gemm=True,
            moe_token_dispatcher_type="alltoall",
        )
    if c.dsa_indexer_n_heads:
        kw.update(
            experimental_attention_variant="dsa",
            dsa_indexer_n_heads=c.dsa_indexer_n_heads,
            dsa_indexer_head_dim=c.dsa_indexer_head_dim,
            dsa_indexer_topk=c.dsa_indexer_topk,
            dsa_indexer_loss_coeff=c.dsa_indexer_loss_coeff,
            dsa_indexer_use_sparse_loss=c.dsa_indexer_use_sparse_loss,
        )
    if c.mtp_depths:
        kw.update(mtp_num_layers=c.mtp_depths, mtp_loss_scaling_factor=c.mtp_loss_scaling_factor)
        kw["mtp_use_repeated_layer"] = c.mtp_use_repeated_layer  # dropped below where unknown
    return kw


def to_megatron_config(cfg: ModelConfig, **parallel: Any):
    """Megatron-core ``MLATransformerConfig`` (or ``TransformerConfig`` for GQA). ``parallel``
    passes through Megatron's own fields (e.g. ``expert_model_parallel_size``, ``bf16``)."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    cls = MLATransformerConfig if cfg.multi_latent_attention else TransformerConfig
    known = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in {**megatron_fields(cfg), **parallel}.items() if k in known}
    if cls is TransformerConfig:
        kw.pop("multi_latent_attention", None)
    return cls(**kw)


# -- state dict names -------------------------------------------------------------------------
def _layer_names(name: str, is_moe: bool, mla: bool, spec: Spec, num_experts: int) -> list[tuple[str, Any]]:
    """One layer-local name -> [(megatron name, selector)]; selector None = the whole tensor,
    an int e = expert e of a stacked expert weight."""
    if name.startswith("self_attention.indexer."):  # DSA: Megatron's indexer lives in core_attention
        return [(name.replace("self_attention.", "self_attention.core_attention.", 1), None)]
    if spec == "te":
        if name == "self_attention.q_layernorm.weight" and mla:
            return [("self_attention.linear_q_up_proj.layer_norm_weight", None)]
        if name == "self_attention.kv_layernorm.weight":
            return [("self_attention.linear_kv_up_proj.layer_norm_weight", None)]
        if name == "input_layernorm.weight" and not mla:
            return [("self_attention.linear_qkv.layer_norm_weight", None)]
        if name == "pre_mlp_layernorm.weight" and not is_moe:
            return [("mlp.linear_fc1.layer_norm_weight", None)]
    m = re.fullmatch(r"mlp\.experts\.(linear_fc[12])\.weight", name)
    if m:
        if spec == "te":
            return [(f"mlp.experts.{m.group(1)}.weight{e}", e) for e in range(num_experts)]
        return [(f"mlp.experts.local_experts.{e}.{m.group(1)}.weight", e) for e in range(num_experts)]
    return [(name, None)]


def megatron_names(cfg: ModelConfig, ours: list[str], spec: Spec = "te") -> dict[str, list[tuple[str, Any]]]:
    """Our parameter/buffer name -> the Megatron GPTModel names it is written to."""
    pattern, E, mla = cfg.moe_pattern, cfg.num_moe_experts or 0, cfg.multi_latent_attention
    out: dict[str, list[tuple[str, Any]]] = {}
    for name in ours:
        m = re.fullmatch(r"decoder\.layers\.(\d+)\.(.+)", name)
        if m:
            i = int(m.group(1))
            out[name] = [
                (f"decoder.layers.{i}.{n}", s) for n, s in _layer_names(m.group(2), pattern[i], mla, spec, E)
            ]
            continue
        m = re.fullmatch(r"mtp\.(.+)", name)
        if m:
            rest = m.group(1)
            targets = []
            for d in range(cfg.mtp_depths):
                if rest.startswith("transformer_layer."):
                    inner = _layer_names(rest[len("transformer_layer.") :], pattern[-1], mla, spec, E)
                    targets += [(f"mtp.layers.{d}.transformer_layer.{n}", s) for n, s in inner]
                else:
                    targets.append((f"mtp.layers.{d}.{rest}", None))
            out[name] = targets
            continue
        out[name] = [(name, None)]
    return out


def to_megatron_state_dict(
    cfg: ModelConfig, state: dict[str, torch.Tensor], spec: Spec = "te"
) -> dict[str, torch.Tensor]:
    """Our state dict under Megatron GPTModel names (tensors shared, not copied, where possible)."""
    out: dict[str, torch.Tensor] = {}
    for name, targets in megatron_names(cfg, list(state), spec).items():
        t = state[name]
        for mname, sel in targets:
            out[mname] = t if sel is None else t[sel]
    return out


def from_megatron_state_dict(
    cfg: ModelConfig, meg: dict[str, torch.Tensor], ours: list[str], spec: Spec = "te"
) -> dict[str, torch.Tensor]:
    """The inverse of ``to_megatron_state_dict`` for full (TP-gathered) tensors: our names
    ``ours`` (a ``GLMModel``'s state-dict keys) from Megatron's. Experts are stacked back;
    Megatron 0.16's per-depth MTP copies (it trains them apart; ours shares one layer) must be
    equal, else there is no faithful conversion and it says which tensor differs."""
    out: dict[str, torch.Tensor] = {}
    for name, targets in megatron_names(cfg, ours, spec).items():
        absent = [m for m, _ in targets if m not in meg]
        if absent:
            raise KeyError(f"{name}: the Megatron state dict has no {absent[0]}")
        g = cfg.num_moe_experts if targets[0][1] is not None else 1  # experts are stacked back
        groups = [targets[i : i + g] for i in range(0, len(targets), g)]  # one group per MTP depth
        copies = [torch.stack([meg[m] for m, _ in grp]) if grp[0][1] is not None else meg[grp[0][0]] for grp in groups]
        for grp, other in zip(groups[1:], copies[1:], strict=True):
            if not torch.equal(other, copies[0]):
                raise ValueError(f"{name}: Megatron's MTP depths hold different weights ({grp[0][0]} differs from "
                                 "depth 0); our model shares one MTP layer across depths")  # fmt: skip
        out[name] = copies[0]
    return out


def build_megatron_model(cfg: ModelConfig, spec: Spec = "local", core_attention: Any = None, experts: Any = None,
                         vp_stage: int | None = None, **parallel: Any):  # fmt: skip
    """Megatron GPTModel for ``cfg`` (call after ``parallel_state.initialize_model_parallel``).

    ``spec="local"``: Megatron's own modules with ``training/tools/megatron_local.py``'s substitutions
    (no Transformer Engine needed; DSA supported). ``spec="te"``: Megatron's Transformer-Engine
    specs (TE must be installed; no DSA in 0.16.1). ``core_attention`` (not DSA) replaces the
    core attention, e.g. ``training.megatron.attention``'s document-masked one; ``experts``
    replaces the MoE layers' experts module (e.g. ``training.megatron.experts``' grouped GEMM).
    ``vp_stage``: the virtual pipeline stage this model chunk is (interleaved schedule).
    ``parallel`` passes through Megatron config fields (``use_cpu_initialization``,
    ``moe_token_dispatcher_type``, ``bf16``, ``pipeline_model_parallel_layout``, ...)."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_mtp_block_spec

    from training.tools import megatron_local

    mcfg = to_megatron_config(cfg, **parallel)
    dsa = bool(cfg.dsa_indexer_n_heads)
    if spec == "te":
        if dsa:
            raise NotImplementedError(
                "megatron-core 0.16.1 has no TE decoder-block spec for DSA (experimental_attention_variant="
                "'dsa' is not wired); use spec='local'"
            )
        block = get_gpt_decoder_block_spec(mcfg, use_transformer_engine=True, vp_stage=vp_stage)
    else:
        megatron_local.patch_megatron_without_te()
        mcfg.moe_grouped_gemm = False  # local spec: SequentialMLP experts (local_experts.N)
        block = megatron_local.local_block_spec(mcfg, dsa, vp_stage)
    if (core_attention is not None or experts is not None) and dsa:
        raise NotImplementedError("core_attention, experts: DSA layers keep Megatron's DSAttention and experts")
    # the MTP layer is built from the whole model's last layer (not this stage's: a stage may hold
    # the MTP block and no decoder layer, Megatron's "standalone" MTP)
    mtp_layer = megatron_local.last_layer_spec(mcfg, dsa, spec == "te") if cfg.mtp_depths else None
    for layer in [*block.layer_specs, *([mtp_layer] if mtp_layer is not None else [])]:
        _substitute(layer, core_attention, experts)
    mtp = (
        get_gpt_mtp_block_spec(mcfg, mtp_layer, use_transformer_engine=spec == "te", vp_stage=vp_stage)
        if cfg.mtp_depths
        else None
    )
    return GPTModel(
        mcfg,
        block,
        vocab_size=cfg.vocab_size,
        max_sequence_length=1 << 16,
        position_embedding_type="rope",
        rotary_percent=cfg.rotary_percent,
        rotary_base=int(cfg.rotary_base),
        share_embeddings_and_output_weights=not cfg.untie_embeddings_and_output_weights,
        mtp_block_spec=mtp,
        # this pipeline stage's (and virtual stage's) part: the whole model without pipeline parallelism
        pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
        post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
        vp_stage=vp_stage,
    )


def _substitute(layer: Any, core_attention: Any, experts: Any) -> None:
    """Our core attention and experts modules into one decoder layer's spec (in place)."""
    from megatron.core.transformer.moe.moe_layer import MoELayer
    from megatron.core.transformer.spec_utils import ModuleSpec

    if core_attention is not None:
        layer.submodules.self_attention.submodules.core_attention = core_attention
    mlp = layer.submodules.mlp
    if experts is not None and getattr(mlp, "module", None) is MoELayer:
        mlp.submodules.experts = ModuleSpec(module=experts)
