"""Megatron-core's GPTModel without Transformer Engine: the local spec, and what it lacks.

Transformer Engine is a multi-GB CUDA build, so the GPU check (``training/tools/gpu_check.py``) and
the CPU test use Megatron's own local modules (``get_gpt_decoder_block_spec(...,
use_transformer_engine=False)``). In megatron-core 0.16.1 that path does not work as shipped
for a GLM-5-shaped model; each gap below is filled with the smallest piece that makes
Megatron's own code run, and everything else (embedding, MLA projections and norms, Megatron's
RoPE, router, experts, shared expert, final norm, output layer, DSA indexer and sparse
attention) stays Megatron's:

* MLA core attention: the local ``DotProductAttention`` does not accept the ``k_channels`` /
  ``v_channels`` that ``MLASelfAttention`` passes (q/k and v head dims differ in MLA), so it
  cannot be built. ``SDPACoreAttention`` (causal ``scaled_dot_product_attention`` over
  Megatron's q/k/v) takes its place. Packed sequences are not supported there.
* ``multi_latent_attention.HAVE_TE`` is True when only Megatron's TE shim imports (its
  ``TELinear`` is then a mock and ``isinstance`` fails): set to False without TE.
* ``moe_utils.router_gating_linear`` reads a ``te_general_gemm`` that is only defined when TE
  imports (NameError): defined as None without TE.
* DSA: 0.16.1's decoder-block spec does not wire ``experimental_attention_variant="dsa"``
  (only gated_delta_net), and ``get_dsa_module_spec_for_backend`` needs TE's fused
  layernorm-linear. ``dsa_core_attention_spec`` builds Megatron's own ``DSAttention`` /
  ``DSAIndexer`` with plain linears and a LayerNorm; with the q norm kept as a separate module
  the indexer reads the normalized query latent, as DeepSeek-V3.2 (and our model) do — TE's
  fused spec would feed it the pre-norm latent. The indexer's Hadamard ``rotate_activation``
  needs ``fast_hadamard_transform`` and bf16; it is an orthonormal rotation of both q and k,
  so ``q . k`` is unchanged without it (identity when the package is absent).

CPU-only torch cannot build this model at all without two more changes that only a test
makes (``tests/training/tools/test_megatron_bridge.py``): Megatron's ``RotaryEmbedding`` calls
``torch.cuda.current_device()`` even with ``use_cpu_initialization``, and the all-to-all token
dispatcher creates a CUDA stream (the test uses the allgather dispatcher).
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F


def have_transformer_engine() -> bool:
    return importlib.util.find_spec("transformer_engine") is not None


def patch_megatron_without_te() -> list[str]:
    """Apply the module-level fixes above (idempotent); return what was patched."""
    done = []
    if have_transformer_engine():
        return done
    import megatron.core.transformer.moe.moe_utils as moe_utils
    import megatron.core.transformer.multi_latent_attention as mla

    if mla.HAVE_TE:
        mla.HAVE_TE = False
        done.append("multi_latent_attention.HAVE_TE=False")
    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
        done.append("moe_utils.te_general_gemm=None")
    from megatron.core.transformer.experimental_attention_variant import dsa

    if dsa.hadamard_transform is None and dsa.rotate_activation is not _identity:
        dsa.rotate_activation = _identity
        done.append("dsa.rotate_activation=identity (orthonormal; q.k unchanged)")
    return done


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _sdpa_core_attention_class():
    from megatron.core.transformer.module import MegatronModule

    class SDPACoreAttention(MegatronModule):
        """Causal SDPA over Megatron's [s, b, heads, dim] q/k/v -> [s, b, heads * v_dim]."""

        def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None,
                     softmax_scale=None, k_channels=None, v_channels=None, cp_comm_type=None,
                     pg_collection=None, **_):  # fmt: skip
            super().__init__(config=config)
            self.softmax_scale = softmax_scale

        def forward(self, query, key, value, attention_mask=None, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None, **_):  # fmt: skip
            if packed_seq_params is not None:
                raise NotImplementedError("SDPACoreAttention: packed sequences are not supported")
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
            s, b, h, d = value.shape
            return out.permute(2, 0, 1, 3).reshape(query.shape[0], b, h * d)

    return SDPACoreAttention


class _Linear(torch.nn.Linear):
    """A plain linear with Megatron's build signature and (output, bias) return."""

    def __init__(self, in_features, out_features, *, config=None, init_method=None, bias=False,
                 skip_bias_add=False, skip_weight_param_allocation=False, parallel_mode=None, **_):  # fmt: skip
        super().__init__(in_features, out_features, bias=bias)

    def forward(self, x):  # noqa: D102
        return super().forward(x), None


def dsa_core_attention_spec():
    from megatron.core.transformer.experimental_attention_variant import dsa
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    indexer = ModuleSpec(
        module=dsa.DSAIndexer,
        submodules=dsa.DSAIndexerSubmodules(
            linear_wq_b=_Linear, linear_wk=_Linear, k_norm=WrappedTorchNorm, linear_weights_proj=_Linear
        ),
    )
    return ModuleSpec(module=dsa.DSAttention, submodules=dsa.DSAttentionSubmodules(indexer=indexer))


def _layer_specs(mcfg, dsa: bool, use_te: bool, build):
    variant = mcfg.experimental_attention_variant
    mcfg.experimental_attention_variant = None  # 0.16.1's block spec refuses "dsa"
    try:
        out = build(mcfg, use_transformer_engine=use_te)
    finally:
        mcfg.experimental_attention_variant = variant
    if not use_te:
        core = dsa_core_attention_spec() if dsa else _sdpa_core_attention_class()
        for spec in out.layer_specs if hasattr(out, "layer_specs") else out:
            spec.submodules.self_attention.submodules.core_attention = core
    return out


def local_block_spec(mcfg, dsa: bool, vp_stage: int | None = None):
    """Megatron's local decoder-block spec (this pipeline stage's layers) with the substitutions above."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    return _layer_specs(mcfg, dsa, False, lambda c, **kw: get_gpt_decoder_block_spec(c, vp_stage=vp_stage, **kw))


def last_layer_spec(mcfg, dsa: bool, use_te: bool):
    """The whole model's last decoder layer spec (what Megatron's MTP layer is built from)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_layer_specs

    return _layer_specs(mcfg, dsa, use_te, get_gpt_decoder_layer_specs)[-1]
