"""Core attention for Megatron's local MLA spec that honours ``attention_mask`` (document masks).

Megatron-core 0.16.1's local ``DotProductAttention`` cannot be built for MLA (it refuses the
``k_channels``/``v_channels`` MLA passes; see ``training/tools/megatron_local.py``), and the
stand-in there is causal over the whole row. This one takes the block-diagonal causal mask
``training.megatron.batches`` builds (True = masked, Megatron's convention) and otherwise is
the same ``scaled_dot_product_attention`` over Megatron's own q/k/v: everything around it
(projections, norms, RoPE, output projection, tensor-parallel heads) stays Megatron's.
"""

from __future__ import annotations

import torch.nn.functional as F


def document_masked_attention_class():
    from megatron.core.transformer.module import MegatronModule

    class DocumentMaskedAttention(MegatronModule):
        """[s, b, heads, dim] q/k/v -> [s, b, heads * v_dim]; causal, or ``attention_mask``."""

        def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None,
                     softmax_scale=None, k_channels=None, v_channels=None, cp_comm_type=None,
                     pg_collection=None, **_):  # fmt: skip
            super().__init__(config=config)
            self.softmax_scale = softmax_scale

        def forward(self, query, key, value, attention_mask=None, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None, **_):  # fmt: skip
            if packed_seq_params is not None:
                raise NotImplementedError(
                    "DocumentMaskedAttention: packed_seq_params (THD) needs Transformer Engine / flash "
                    "attention; document masks travel as attention_mask here"
                )
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            if attention_mask is None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=~attention_mask, scale=self.softmax_scale)
            s, b, h, d = value.shape
            return out.permute(2, 0, 1, 3).reshape(query.shape[0], b, h * d)

    return DocumentMaskedAttention
