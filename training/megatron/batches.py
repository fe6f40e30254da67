"""Our loader's ``Batch`` as the tensors Megatron's ``GPTModel.forward`` takes, document masks included.

Megatron-core trains packed documents through ``packed_seq_params`` (THD layout, cu_seqlens),
which only Transformer Engine's / flash attention's kernels accept; the local spec's attention
has no such path. Here the same effect comes from what ``GPTModel`` does accept on every
backend:

* ``attention_mask`` [B, 1, S, S] (Megatron's convention: True = masked out): causal and
  block-diagonal per document, honoured by ``DocumentMaskedAttention`` (``attention.py``);
* the LM ``loss_mask``: no target crosses a document boundary (and, for SFT shards, only
  trained tokens), exactly ours (``training/model/glm.py`` ``_shifted_ce``);
* RoPE positions are *not* restarted per document (Megatron restarts them only with
  ``packed_seq_params``): inside a document attention sees only its own keys, and RoPE scores
  depend on the position difference alone, so the scores equal ours up to float rounding.
* MTP: Megatron rolls the ``loss_mask`` it is given once per depth, so depth d trains target
  t+d+1 where mask[t+d] is set. ``mtp_loss_mask`` makes that mask ours for depth 1 (target in
  the same document as position t); with more depths Megatron's rolled mask also trains
  targets whose position t+d is in the next document (ours does not), a difference limited
  to the d tokens before each boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from training.loader import Batch
from training.model.doc_mask import segment_ids


@dataclass
class MicroBatch:
    tokens: torch.Tensor  # [B, S] int64
    position_ids: torch.Tensor  # [B, S]
    labels: torch.Tensor  # [B, S]: token t+1 at t (the last position's label is masked)
    loss_mask: torch.Tensor  # [B, S] float: 1 where the LM target at t is trained
    mtp_loss_mask: torch.Tensor  # [B, S] float: what GPTModel rolls for its MTP depths
    attention_mask: torch.Tensor | None  # [B, 1, S, S] bool, True = masked; None = one document per row


def to_microbatch(batch: Batch, device: torch.device | str = "cpu", document_masks: bool = True) -> MicroBatch:
    tokens = batch.tokens.long()
    B, S = tokens.shape
    seg = segment_ids(batch.doc_lens, S)
    same_next = torch.zeros(B, S, dtype=torch.bool)
    same_next[:, :-1] = seg[:, 1:] == seg[:, :-1]
    # MTP depth 1 reads mask[t+1] for position t: ours trains it iff token t+2 is in t's document
    mtp = torch.zeros(B, S, dtype=torch.bool)
    if S > 2:
        mtp[:, 1:-1] = seg[:, 2:] == seg[:, :-2]
    if batch.loss_mask is not None:  # SFT: only trained target tokens
        trained = batch.loss_mask.bool()
        same_next[:, :-1] &= trained[:, 1:]
        mtp[:, :-1] &= trained[:, 1:]
    attn = None
    if document_masks and bool((seg != seg[:, :1]).any()):
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        allowed = (seg[:, :, None] == seg[:, None, :]) & causal
        attn = ~allowed[:, None]
    labels = torch.roll(tokens, -1, dims=1)
    t = (tokens, torch.arange(S).expand(B, S), labels, same_next.float(), mtp.float())
    t = tuple(x.to(device) for x in t)
    return MicroBatch(*t, None if attn is None else attn.to(device))
