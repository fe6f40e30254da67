"""A small causal LM with document masking: the minimal consumer of the shard contract.

Attention never crosses a document boundary inside a packed sequence (the mask is built from
``doc_lens``), positions restart at each document, and the loss does not ask a document's
last token to predict the next document's first. The GLM-5-shaped MoE model (``glm.py``) is the
real model; this one exists so the data -> shards -> trainer path runs end to end
(``training.train_loop``) and as a cheap scorer for tests. Both share ``doc_mask``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from core.config import StrictModel
from training.model.doc_mask import document_causal_mask, document_positions, segment_ids


class TinyLMConfig(StrictModel):
    vocab_size: int = Field(default=0, ge=0)  # 0 = take it from the shard manifest
    d_model: int = Field(default=128, gt=0)
    n_layers: int = Field(default=2, gt=0)
    n_heads: int = Field(default=4, gt=0)
    d_ff: int = Field(default=384, gt=0)
    max_seq_len: int = Field(default=4096, gt=0)


class Block(nn.Module):
    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.norm1 = nn.RMSNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.norm2 = nn.RMSNorm(cfg.d_model)
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.n_heads, D // self.n_heads).unbind(2)
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        )
        x = x + self.proj(att.transpose(1, 2).reshape(B, L, D))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class TinyLM(nn.Module):
    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        if cfg.vocab_size <= 0:
            raise ValueError("TinyLMConfig.vocab_size must be set (take it from the shard manifest)")
        if cfg.d_model % cfg.n_heads:
            raise ValueError(f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        B, L = tokens.shape
        if L > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {L} > max_seq_len {self.cfg.max_seq_len}")
        seg = segment_ids(doc_lens, L)
        x = self.embed(tokens.long()) + self.pos(document_positions(seg))
        mask = document_causal_mask(seg)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))

    def loss(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        """Next-token cross-entropy, not across document boundaries."""
        logits = self(tokens, doc_lens)
        seg = segment_ids(doc_lens, tokens.shape[1])
        targets = tokens[:, 1:].long().clone()
        targets[seg[:, 1:] != seg[:, :-1]] = -100
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
        )
