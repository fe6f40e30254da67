"""Our ``ModelConfig`` <-> a Hugging Face ``config.json`` for glm_moe_dsa, glm4_moe and deepseek_v3.

Every difference found by reading transformers' own implementations (5.x:
``models/glm_moe_dsa``, ``models/glm4_moe``, ``models/deepseek_v3``) and what is done about it.
Layout differences are undone by the weight conversion (``training.hf.weights``); behaviour
differences are either a config field of ours or refused here with the reason (never a silent
change of the model):

* **RoPE, MLA (glm_moe_dsa, deepseek_v3 with ``rope_interleave: true``).** transformers rotates
  interleaved pairs (x0, x1), (x2, x3)... and writes the result de-interleaved; ours de-interleaves
  then rotates halves (Megatron's MLA convention). Same numbers, no conversion. deepseek_v3 with
  ``rope_interleave: false`` rotates halves of the raw dims: import permutes the RoPE rows of
  ``q_b_proj``/``q_proj`` and ``kv_a_proj_with_mqa`` so ours gives the same rotation; export always
  writes ``rope_interleave: true``.
* **RoPE, GQA (glm4_moe).** Half rotation of the first ``partial_rotary_factor`` of each head =
  ours with ``rotary_percent``; equal.
* **RoPE scaling.** transformers supports YaRN etc. (``rope_parameters.rope_type`` != default, which
  also rescales the softmax by ``mscale``); ours has plain RoPE: import refuses other types.
* **DSA indexer head layout.** transformers' GLM-5 indexer puts the RoPE dims FIRST in each indexer
  head ([rope, nope], interleaved rotation); ours (Megatron's) puts them last ([nope, rope]). The
  weight conversion rotates the rows of ``wq_b``, ``wk`` and ``k_norm``; scores are identical.
* **DSA indexer scale.** transformers: ``ReLU(q.k * d^-1/2)`` weighted by ``w * n^-1/2``; ours folds
  both scales into the weights (``w * n^-1/2 * d^-1/2``), equal since ReLU is positively homogeneous.
* **DSA cross-layer top-k sharing** (``indexer_types: shared``): not in ours; import refuses it.
* **DSA top-k ties.** transformers takes ``torch.topk``'s (unspecified) choice among equal index
  scores; ours keeps the earliest positions. Only exact ties at the k-th score can differ.
* **Norm epsilons.** transformers fixes 1e-6 for the MLA latent norms (``q_a_layernorm``,
  ``kv_a_layernorm``) and the indexer's ``k_norm``, whatever ``rms_norm_eps`` says; ours used
  ``layernorm_epsilon`` (Megatron). Now configurable: ``qk_layernorm_epsilon`` and
  ``dsa_indexer_layernorm_epsilon`` (None = ``layernorm_epsilon``); import sets 1e-6, export warns
  when a checkpoint trained with another value (its logits then differ slightly there).
* **Router.** Both: sigmoid scores, the expert bias (``e_score_correction_bias``) only chooses,
  chosen scores renormalized (+1e-20) then times ``routed_scaling_factor``
  (``moe_router_topk_scaling_factor``). Differences: (a) transformers scores a group by the sum of
  its top-2 experts, Megatron/ours by its top ``topk / group_topk``: group-limited routing converts
  only where the two agree (DeepSeek-V3: 8 / 4 = 2), else it is refused; ``n_group: 1`` = no groups;
  (b) ``norm_topk_prob`` is a switch there; ours normalizes iff top-k > 1: other combinations are
  refused; (c) softmax routers do not exist there: refused on export.
* **Shared experts.** transformers: ``n_shared_experts x moe_intermediate_size``; ours one width
  (``moe_shared_expert_intermediate_size``), exported as a multiple of the expert width.
* **Dense layers.** glm4_moe/deepseek_v3 only have dense-first (``first_k_dense_replace``);
  glm_moe_dsa has a per-layer ``mlp_layer_types``; ours any 0/1 pattern (``moe_layer_freq``).
* **MTP.** transformers has no MTP: it ignores the NextN layer ``model.layers.{N}`` (N =
  ``num_hidden_layers``; DeepSeek-V3 layout: ``enorm``, ``hnorm``, ``eh_proj``, a decoder layer,
  ``shared_head.norm``, plus copies of ``embed_tokens`` and ``shared_head.head``). Ours: ONE shared
  layer applied ``mtp_num_layers`` times, sharing the main embedding and output layer; it travels
  in that layout (``num_nextn_predict_layers: 1``), the copies are written on export and checked
  equal on import (a checkpoint with several distinct NextN layers is refused). MTP logits cannot
  be compared with transformers (no implementation there); ours feeds the MTP layer the main
  model's hidden state after its final norm (Megatron's convention), unverified against NextN
  readers (vLLM, SGLang).
* **Embeddings.** Ours are untied; a tied HF model imports with ``lm_head`` = ``embed_tokens``
  (they untie when trained). ``attention_bias`` (MLA), ``mlp_bias`` and activations other than
  SiLU do not exist in ours: refused.
"""

from __future__ import annotations

from typing import Any

from core.errors import UserError
from training.model.config import ModelConfig

ARCHS = {
    "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}
REFERENCE_NORM_EPS = 1e-6  # transformers' fixed eps of the MLA latent norms and the indexer k_norm


def default_arch(cfg: ModelConfig) -> str:
    if not cfg.multi_latent_attention:
        return "glm4_moe"
    return "glm_moe_dsa" if cfg.dsa_indexer_n_heads else "deepseek_v3"


def _refuse(arch: str, why: str) -> UserError:
    return UserError(f"cannot export to {arch}: {why}")


def to_hf_config(cfg: ModelConfig, arch: str | None = None) -> dict[str, Any]:
    """The ``config.json`` fields for ``arch`` (fields not set take the transformers class defaults)."""
    arch = arch or default_arch(cfg)
    if arch not in ARCHS:
        raise UserError(f"unknown architecture {arch!r} (available: {', '.join(ARCHS)})")
    mla = arch in ("glm_moe_dsa", "deepseek_v3")
    if mla != cfg.multi_latent_attention:
        raise _refuse(arch, f"it {'needs' if mla else 'has no'} multi-latent attention")
    if arch == "glm_moe_dsa" and not cfg.dsa_indexer_n_heads:
        raise _refuse(arch, "every GLM-5 layer has a DSA indexer; this model has none (use deepseek_v3)")
    if arch != "glm_moe_dsa" and cfg.dsa_indexer_n_heads:
        raise _refuse(arch, "it has no DSA indexer (use glm_moe_dsa)")
    if arch == "glm_moe_dsa" and cfg.q_lora_rank is None:
        raise _refuse(arch, "its indexer reads the query latent: q_lora_rank must be set")
    out: dict[str, Any] = {
        "model_type": arch,
        "architectures": [ARCHS[arch]],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.ffn_hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "rms_norm_eps": cfg.layernorm_epsilon,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rotary_base},
        "initializer_range": cfg.init_method_std,
        "num_nextn_predict_layers": 1 if cfg.mtp_depths else 0,
    }
    if mla:
        out.update(
            num_key_value_heads=cfg.num_attention_heads,
            q_lora_rank=cfg.q_lora_rank,
            kv_lora_rank=cfg.kv_lora_rank,
            qk_nope_head_dim=cfg.qk_head_dim,
            qk_rope_head_dim=cfg.qk_pos_emb_head_dim,
            v_head_dim=cfg.v_head_dim,
            attention_bias=False,
        )
        if not cfg.qk_layernorm:
            raise _refuse(arch, "its MLA always normalizes the q and kv latents (qk_layernorm: false)")
        if arch == "deepseek_v3":
            out["rope_interleave"] = True
    else:
        out.update(
            num_key_value_heads=cfg.num_query_groups or cfg.num_attention_heads,
            head_dim=cfg.gqa_head_dim,
            attention_bias=cfg.add_qkv_bias,
            use_qk_norm=cfg.qk_layernorm,
        )
        out["rope_parameters"]["partial_rotary_factor"] = cfg.rotary_percent
    if arch == "glm_moe_dsa":
        out.update(
            index_n_heads=cfg.dsa_indexer_n_heads,
            index_head_dim=cfg.dsa_indexer_head_dim,
            index_topk=cfg.dsa_indexer_topk,
            indexer_types=["full"] * cfg.num_layers,
        )
    out.update(_moe_fields(cfg, arch))
    return out


def _moe_fields(cfg: ModelConfig, arch: str) -> dict[str, Any]:
    pattern = cfg.moe_pattern
    k_dense = next((i for i, moe in enumerate(pattern) if moe), len(pattern))
    out: dict[str, Any] = {"first_k_dense_replace": k_dense}
    if arch == "glm_moe_dsa":
        out["mlp_layer_types"] = ["sparse" if moe else "dense" for moe in pattern]
    elif pattern != [False] * k_dense + [True] * (len(pattern) - k_dense):
        raise _refuse(arch, f"it has dense-first layers only; this model's MoE pattern is {pattern}")
    if not cfg.num_moe_experts:
        return out  # all dense: the MoE fields keep the class defaults, never used
    if cfg.moe_router_score_function != "sigmoid":
        raise _refuse(arch, "its router scores with a sigmoid (moe_router_score_function: softmax)")
    f, s, k = cfg.moe_ffn_hidden_size, cfg.moe_shared_expert_intermediate_size or 0, cfg.moe_router_topk
    if s % f:
        raise _refuse(arch, f"shared experts are a multiple of the expert width {f}; got {s}")
    groups, gk = cfg.moe_router_num_groups or 1, cfg.moe_router_group_topk or 1
    if groups > 1 and k // gk != 2:
        raise _refuse(arch, f"its group score is the top-2 experts' sum; ours sums the top {k // gk}")
    out.update(
        n_routed_experts=cfg.num_moe_experts,
        num_experts_per_tok=k,
        moe_intermediate_size=f,
        n_shared_experts=s // f,
        routed_scaling_factor=cfg.moe_router_topk_scaling_factor or 1.0,
        n_group=groups,
        topk_group=gk,
        norm_topk_prob=k > 1,  # ours renormalizes sigmoid gates iff top-k > 1
    )
    return out


def export_warnings(cfg: ModelConfig, arch: str) -> list[str]:
    """Differences an export keeps (the model loads there, its logits are slightly different)."""
    out = []
    if arch in ("glm_moe_dsa", "deepseek_v3") and cfg.qk_norm_eps != REFERENCE_NORM_EPS:
        out.append(f"MLA latent norms use eps {cfg.qk_norm_eps} here, {REFERENCE_NORM_EPS} in transformers")
    if arch == "glm_moe_dsa":
        eps = cfg.dsa_indexer_layernorm_epsilon or cfg.layernorm_epsilon
        if eps != REFERENCE_NORM_EPS:
            out.append(f"the DSA indexer k_norm uses eps {eps} here, {REFERENCE_NORM_EPS} in transformers")
    if cfg.mtp_depths > 1:
        out.append(f"the one MTP layer is applied {cfg.mtp_depths} times here; NextN readers apply it once")
    return out


# -- import -------------------------------------------------------------------------------------
def from_hf_config(hf: dict[str, Any], has_mtp_weights: bool = False) -> ModelConfig:
    """Our config for a transformers ``config.json`` (``hf``: its dict); refuses what ours cannot run."""
    arch = hf.get("model_type")
    if arch not in ARCHS:
        raise UserError(f"config.json: model_type {arch!r} is not one of {', '.join(ARCHS)}")

    def need(cond: bool, why: str) -> None:
        if not cond:
            raise UserError(f"config.json ({arch}): {why}")

    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    need(rope.get("rope_type", rope.get("type", "default")) == "default",
         f"rope_type {rope.get('rope_type', rope.get('type'))!r}: only plain RoPE is implemented here")  # fmt: skip
    need(hf.get("hidden_act", "silu") == "silu", f"hidden_act {hf.get('hidden_act')!r}: only SiLU is implemented")
    need(not hf.get("mlp_bias", False), "mlp_bias: MLP biases are not implemented here")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    layers = hf["num_hidden_layers"]
    kw: dict[str, Any] = {
        "num_layers": layers,
        "hidden_size": hf["hidden_size"],
        "ffn_hidden_size": hf["intermediate_size"],
        "num_attention_heads": hf["num_attention_heads"],
        "vocab_size": hf["vocab_size"],
        "layernorm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "rotary_base": float(theta),
        "init_method_std": hf.get("initializer_range", 0.02),
    }
    if arch == "glm4_moe":
        heads = hf["num_attention_heads"]
        kw.update(
            multi_latent_attention=False,
            num_query_groups=hf.get("num_key_value_heads") or heads,
            kv_channels=hf.get("head_dim") or hf["hidden_size"] // heads,
            add_qkv_bias=bool(hf.get("attention_bias", False)),
            qk_layernorm=bool(hf.get("use_qk_norm", False)),
            rotary_percent=float(rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 0.5))),
        )
    else:
        need(not hf.get("attention_bias", False), "attention_bias: MLA projection biases are not implemented here")
        kw.update(
            multi_latent_attention=True,
            q_lora_rank=hf.get("q_lora_rank"),
            kv_lora_rank=hf["kv_lora_rank"],
            qk_head_dim=hf["qk_nope_head_dim"],
            qk_pos_emb_head_dim=hf["qk_rope_head_dim"],
            v_head_dim=hf["v_head_dim"],
            qk_layernorm=True,
            qk_layernorm_epsilon=REFERENCE_NORM_EPS,
        )
    if arch == "glm_moe_dsa":
        types = hf.get("indexer_types") or ["full"] * layers
        need(all(t == "full" for t in types), "indexer_types 'shared' (cross-layer top-k reuse) is not implemented")
        kw.update(
            dsa_indexer_n_heads=hf["index_n_heads"],
            dsa_indexer_head_dim=hf["index_head_dim"],
            dsa_indexer_topk=hf["index_topk"],
            dsa_indexer_layernorm_epsilon=REFERENCE_NORM_EPS,
        )
    kw.update(_moe_from_hf(hf, arch, need))
    mtp = hf.get("num_nextn_predict_layers", hf.get("num_mtp_layers", 0)) or 0
    if has_mtp_weights:
        need(mtp <= 1, f"num_nextn_predict_layers {mtp}: ours has ONE shared MTP layer")
        kw["mtp_num_layers"] = 1
    else:
        kw["mtp_num_layers"] = None
    return ModelConfig(**kw).check(f"config.json ({arch})")


def _moe_from_hf(hf: dict[str, Any], arch: str, need) -> dict[str, Any]:
    layers = hf["num_hidden_layers"]
    if arch == "glm_moe_dsa" and hf.get("mlp_layer_types"):
        pattern = [t == "sparse" for t in hf["mlp_layer_types"]]
    else:
        k_dense = min(hf.get("first_k_dense_replace") or 0, layers)
        pattern = [i >= k_dense for i in range(layers)]
    if not any(pattern):
        return {"num_moe_experts": None, "moe_ffn_hidden_size": None, "moe_shared_expert_intermediate_size": None}
    k, E = hf["num_experts_per_tok"], hf["n_routed_experts"]
    norm = hf.get("norm_topk_prob", True)
    need(norm == (k > 1), f"norm_topk_prob {norm} with top-{k}: ours renormalizes the gates iff top-k > 1")
    groups, gk = hf.get("n_group") or 1, hf.get("topk_group") or 1
    need(groups == 1 or k // gk == 2,
         f"n_group {groups} / topk_group {gk}: its group score sums the top-2 experts, ours the top {k // gk}")  # fmt: skip
    f = hf["moe_intermediate_size"]
    shared = (hf.get("n_shared_experts") or 0) * f
    first = next(i for i, p in enumerate(pattern) if p)
    dense_first = pattern == [False] * first + [True] * (layers - first)
    return {
        "num_moe_experts": E,
        "moe_router_topk": k,
        "moe_ffn_hidden_size": f,
        "moe_shared_expert_intermediate_size": shared or None,
        "moe_router_score_function": "sigmoid",
        "moe_router_enable_expert_bias": True,
        "moe_router_topk_scaling_factor": float(hf.get("routed_scaling_factor", 1.0)),
        "moe_router_num_groups": groups if groups > 1 else None,
        "moe_router_group_topk": gk if groups > 1 else None,
        "moe_layer_freq": 1 if dense_first else [int(p) for p in pattern],
        "moe_first_k_dense_layers": first if dense_first else 0,
    }
