"""The GLM-5-shaped model: dense first layers, then MoE layers; MLA; shared-parameter MTP.

Module names mirror Megatron-core's ``GPTModel`` (``embedding.word_embeddings``,
``decoder.layers.N.{input_layernorm, self_attention, pre_mlp_layernorm, mlp}``,
``decoder.final_layernorm``, ``output_layer``) so ``megatron_bridge`` only renames the few
places where Megatron's spec fuses a norm into the next linear.

Packed sequences are handled by ``doc_mask``: attention stays inside a document, RoPE
positions restart per document, and no target crosses a boundary.

MTP (multi-token prediction) with parameter sharing: ONE ``MTPLayer`` is applied
``mtp_num_layers`` times. Depth d (1-based) combines the previous depth's hidden state at
position t with the embedding of token t+d and predicts token t+d+1 through the shared output
layer, as Megatron's ``MultiTokenPredictionLayer`` does. Its loss is averaged over depths and
scaled by ``mtp_loss_scaling_factor``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from core.errors import ConfigError
from training.model.config import ModelConfig
from training.model.doc_mask import document_causal_mask, document_positions, segment_ids
from training.model.gqa import GQA
from training.model.mla import MLA, LatentCache
from training.model.moe import MLP, MoELayer


class TransformerLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, moe: bool, ep_group: dist.ProcessGroup | None = None):
        super().__init__()
        h, eps = cfg.hidden_size, cfg.layernorm_epsilon
        self.input_layernorm = nn.RMSNorm(h, eps=eps)
        self.self_attention = MLA(cfg) if cfg.multi_latent_attention else GQA(cfg)
        self.pre_mlp_layernorm = nn.RMSNorm(h, eps=eps)
        self.is_moe = moe
        self.mlp = MoELayer(cfg, ep_group) if moe else MLP(h, cfg.ffn_hidden_size)

    def _mlp(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.pre_mlp_layernorm(x)
        if self.is_moe:
            out, aux = self.mlp(y)
            return x + out, aux
        return x + self.mlp(y), x.new_zeros((), dtype=torch.float32)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor):
        x = x + self.self_attention(self.input_layernorm(x), positions, mask)
        return self._mlp(x)

    def decode(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        cache: LatentCache | None,
        key_mask: torch.Tensor | None = None,
    ):
        out, cache = self.self_attention.decode(self.input_layernorm(x), positions, cache, key_mask=key_mask)
        x, _ = self._mlp(x + out)
        return x, cache


class MTPLayer(nn.Module):
    """Megatron's ``MultiTokenPredictionLayer``: norms, eh_proj over [embedding; hidden], one
    transformer layer (the last decoder layer's kind) and a final norm."""

    def __init__(self, cfg: ModelConfig, moe: bool, ep_group: dist.ProcessGroup | None = None):
        super().__init__()
        h, eps = cfg.hidden_size, cfg.layernorm_epsilon
        self.enorm = nn.RMSNorm(h, eps=eps)
        self.hnorm = nn.RMSNorm(h, eps=eps)
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.transformer_layer = TransformerLayer(cfg, moe, ep_group)
        self.final_layernorm = nn.RMSNorm(h, eps=eps)

    def forward(self, hidden: torch.Tensor, emb: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor):
        x = self.eh_proj(torch.cat((self.enorm(emb), self.hnorm(hidden)), -1))
        x, aux = self.transformer_layer(x, positions, mask)
        return self.final_layernorm(x), aux


class GLMModel(nn.Module):
    def __init__(self, cfg: ModelConfig, ep_group: dist.ProcessGroup | None = None):
        super().__init__()
        cfg.check()
        if cfg.vocab_size <= 0:
            raise ConfigError("model.vocab_size: must be set (the trainer takes it from the shard manifest)")
        if not cfg.untie_embeddings_and_output_weights:
            raise ConfigError("model.untie_embeddings_and_output_weights: only untied (true) is implemented")
        self.cfg = cfg
        h = cfg.hidden_size
        self.embedding = nn.Module()
        self.embedding.word_embeddings = nn.Embedding(cfg.vocab_size, h)
        self.decoder = nn.Module()
        self.decoder.layers = nn.ModuleList(TransformerLayer(cfg, moe, ep_group) for moe in cfg.moe_pattern)
        self.decoder.final_layernorm = nn.RMSNorm(h, eps=cfg.layernorm_epsilon)
        self.output_layer = nn.Linear(h, cfg.vocab_size, bias=False)
        self.mtp = MTPLayer(cfg, cfg.moe_pattern[-1], ep_group) if cfg.mtp_depths else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, std) everywhere; output projections scaled by 1/sqrt(2 * layers) (Megatron's
        ``output_layer_init_method``); norms one; biases and expert bias zero."""
        std = self.cfg.init_method_std
        out_std = std / math.sqrt(2 * self.cfg.num_layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 1:
                nn.init.ones_(p)
            elif name.endswith(("linear_proj.weight", "linear_fc2.weight")):
                nn.init.normal_(p, std=out_std)
            else:
                nn.init.normal_(p, std=std)
        for name, b in self.named_buffers():
            if name.endswith("expert_bias"):
                b.zero_()

    # -- introspection used by the optimizer, QK-clip and the trainer --------------------------
    def attention_modules(self) -> Iterator[tuple[str, MLA | GQA]]:
        for name, m in self.named_modules():
            if isinstance(m, (MLA, GQA)):
                yield name, m

    def moe_layers(self) -> Iterator[MoELayer]:
        for m in self.modules():
            if isinstance(m, MoELayer):
                yield m

    def up_proj_blocks(self) -> dict[str, tuple[int, list[int]]]:
        """Full parameter name -> per-head row blocks, for MuonSplit."""
        return {
            f"{prefix}.{pname}": spec
            for prefix, m in self.attention_modules()
            for pname, spec in m.up_proj_blocks().items()
        }

    def set_dsa_dense(self, on: bool) -> None:
        """DSA dense warm-up (on) or the sparse stage (off); no-op without an indexer."""
        for _, m in self.attention_modules():
            if isinstance(m, MLA):
                m.dsa_dense = on

    def indexer_params(self) -> list[str]:
        """Names of the DSA indexers' parameters (the only ones the dense warm-up trains)."""
        return [n for n, _ in self.named_parameters() if ".indexer." in n]

    def set_record_max_logits(self, on: bool) -> None:
        for _, m in self.attention_modules():
            m.record_max_logits = on
            m.max_logits = None

    def max_attention_logit(self) -> float | None:
        vals = [m.max_logits.max() for _, m in self.attention_modules() if m.max_logits is not None]
        return float(torch.stack(vals).max()) if vals else None

    def update_expert_bias(self, group: dist.ProcessGroup | None = None, move: bool = True) -> float | None:
        """Apply the aux-loss-free bias update in every MoE layer; return the mean max/mean load.
        ``move=False`` (DSA dense warm-up: everything but the indexer is frozen) only clears
        the step's load counts."""
        if not move:
            for layer in self.moe_layers():
                layer.router.local_tokens_per_expert.zero_()
            return None
        ratios = []
        for layer in self.moe_layers():
            load = layer.update_expert_bias(group)
            if load is not None and load.sum() > 0:
                ratios.append(float(load.max() / load.mean()))
        return sum(ratios) / len(ratios) if ratios else None

    # -- training path ---------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor], return_hidden: bool = False):
        seg = segment_ids(doc_lens, tokens.shape[1])
        positions, mask = document_positions(seg), document_causal_mask(seg)
        # built on the CPU from the loader's doc_lens; the model may live on a GPU
        seg, positions, mask = (t.to(tokens.device) for t in (seg, positions, mask))
        x = self.embedding.word_embeddings(tokens.long())
        aux = x.new_zeros((), dtype=torch.float32)
        for layer in self.decoder.layers:
            x, a = layer(x, positions, mask)
            aux = aux + a
        hidden = self.decoder.final_layernorm(x)
        logits = self.output_layer(hidden)
        if return_hidden:
            return logits, hidden, aux, (seg, positions, mask)
        return logits

    def loss(
        self, tokens: torch.Tensor, doc_lens: list[torch.Tensor], loss_mask: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """{'loss': total to minimize, 'lm_loss', 'mtp_loss', 'aux_loss', with DSA 'indexer_loss'};
        no target crosses a document boundary."""
        attn = [m for _, m in self.attention_modules() if isinstance(m, MLA) and m.indexer is not None]
        for m in attn:
            m.indexer_loss = None
        logits, hidden, aux, (seg, positions, mask) = self(tokens, doc_lens, return_hidden=True)
        tokens = tokens.long()
        lm = _shifted_ce(logits, tokens, seg, 1, loss_mask)
        out = {"lm_loss": lm, "aux_loss": aux}
        total = lm + aux
        if self.mtp is not None:
            depths = self.cfg.mtp_depths
            mtp_total = lm.new_zeros(())
            h = hidden
            for d in range(1, depths + 1):
                # token t+d feeds position t; positions past the end are masked by the targets
                emb = self.embedding.word_embeddings(torch.roll(tokens, -d, dims=1))
                h, a = self.mtp(h, emb, positions, mask)
                mtp_total = mtp_total + _shifted_ce(self.output_layer(h), tokens, seg, d + 1, loss_mask)
                total = total + a
            out["mtp_loss"] = mtp_total / depths
            total = total + self.cfg.mtp_loss_scaling_factor * out["mtp_loss"]
        kls = [m.indexer_loss for m in attn if m.indexer_loss is not None]
        if kls:
            # each indexer learns from its own layer's KL (Megatron: coeff x KL per layer, summed);
            # the logged value is the mean per layer call
            out["indexer_loss"] = torch.stack(kls).mean()
            total = total + self.cfg.dsa_indexer_loss_coeff * torch.stack(kls).sum()
        out["loss"] = total
        return out

    # -- decode path ------------------------------------------------------------------------------
    @torch.no_grad()
    def decode(
        self,
        tokens: torch.Tensor,
        caches: list[LatentCache] | None = None,
        positions: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        last_only: bool = False,
    ) -> tuple[torch.Tensor, list[LatentCache]]:
        """Logits for the next ``tokens`` [B, T] given the layers' latent caches (one document
        per row, continuing where the caches end). Batched rows of different lengths pass
        their own RoPE ``positions`` [B, T] and a ``key_mask`` [B, cache length + T] that hides
        left padding (see ``training.serving.sampler``). ``last_only``: the last position's
        logits alone [B, 1, V] (a sampler's prefill: the vocabulary head over every prompt
        position cost more than the layers on a small model's long prompt)."""
        if not self.cfg.multi_latent_attention:
            raise ConfigError("model.multi_latent_attention: the cached decode path is MLA-only")
        if positions is None:
            start = caches[0].length if caches else 0
            positions = (start + torch.arange(tokens.shape[1], device=tokens.device)).expand(tokens.shape[0], -1)
        x = self.embedding.word_embeddings(tokens.long())
        new = []
        for i, layer in enumerate(self.decoder.layers):
            x, c = layer.decode(x, positions, caches[i] if caches else None, key_mask)
            new.append(c)
        if last_only:
            x = x[:, -1:]
        return self.output_layer(self.decoder.final_layernorm(x)), new


def _shifted_ce(
    logits: torch.Tensor, tokens: torch.Tensor, seg: torch.Tensor, shift: int, loss_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Cross-entropy of position t predicting token t+shift, only inside one document and,
    with a ``loss_mask`` (SFT: 1 on trained tokens), only where the target token is trained;
    the mean is over those targets (token-level)."""
    L = tokens.shape[1]
    if L <= shift:
        return logits.sum() * 0
    targets = tokens[:, shift:].clone()
    targets[seg[:, shift:] != seg[:, :-shift]] = -100
    if loss_mask is not None:
        targets[loss_mask[:, shift:] == 0] = -100
    if not (targets != -100).any():  # every document shorter than the shift
        return logits.sum() * 0
    return F.cross_entropy(
        logits[:, :-shift].reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100
    )
