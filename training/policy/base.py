"""What every policy offers: the one interface the sampler, SFT, the RL stages, distillation, the
async trainer and the rollout server use, whatever the network behind it.

A policy is a trainable ``module`` plus what travels with it — its tokenizer and chat template
(``codec``) — and the few operations post-training needs:

* ``policy(tokens, doc_lens)`` -> logits ``[B, L, V]`` of right-padded rows (``doc_lens[i][0]``
  is row i's real length; the rest is padding). ``training.rl.algo.losses.token_logprobs`` turns
  them into per-token logprobs, so the trainer's logprobs have one definition for every policy.
* ``decode(tokens, cache, positions, key_mask)`` -> (logits, cache): the KV-cached step the
  sampler drives (left-padded prompts hidden by ``key_mask``, RoPE ``positions`` per row); the
  logits are the last position's ``[B, 1, V]`` (all a sampler reads: a prompt's every position
  through the vocabulary head was most of a long prefill), and
  ``select(cache, rows)`` to drop finished rows.
* ``optimizer(cfg)``, ``after_step()`` (GLM's aux-loss-free expert-bias update; nothing for
  others), ``save(root, step, optimizer, state)`` -> a checkpoint directory the next stage loads
  with ``training.policy.load_policy`` (tokenizer and chat template inside), and
  ``weight_mismatches(state)`` / ``load_weights(state)`` for pushed weights (a step's
  ``model.safetensors``).

Two implementations: ``GLMPolicy`` (our GLM-5-shaped model, ``training.policy.glm``) and
``HFPolicy`` (any ``transformers`` causal LM directory, ``training.policy.hf``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch

from core.errors import UserError


class ChatCodec(Protocol):
    """Text <-> token ids with the policy's own chat template (``training.policy.codec.Codec``
    for GLM-5's template, ``training.policy.hf.HFCodec`` for a transformers tokenizer's)."""

    stop_ids: list[int]

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int], skip_special: bool = True) -> str: ...

    def token(self, tid: int) -> str: ...

    def chat_prompt(self, messages: Any, thinking: bool = False, tools: Any = None) -> list[int]: ...

    def chat_reply(self, ids: list[int], thinking: bool = False) -> dict[str, Any]: ...

    # multi-turn tool use: did a stopped turn hand over to the tools; the ids of tool results (and
    # any next user turn) appended after it, as the template renders them
    def hands_over(self, ids: list[int]) -> bool: ...

    def observation(self, messages: list[dict[str, Any]], thinking: bool = False) -> tuple[list[int], list[dict]]: ...

    def after_turn(self, last: int | None, new: list[dict[str, Any]], thinking: bool = False) -> list[int] | None: ...

    def save(self, directory: Path) -> None: ...


class Policy:
    """Shared plumbing of both policies; subclasses implement the model-specific parts."""

    kind: str = ""
    module: torch.nn.Module
    codec: ChatCodec | None = None

    # -- model-specific ----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def __call__(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def logits_at(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor], where: torch.Tensor) -> torch.Tensor:
        """[N, V]: the logits at the N positions where ``where`` ([B, L] bool) is set. A policy whose
        head can run on those positions alone overrides this (the losses need a few of them)."""
        return self(tokens, doc_lens)[where]

    def decode(self, tokens: torch.Tensor, cache: Any, positions: torch.Tensor, key_mask: torch.Tensor):
        raise NotImplementedError

    def select(self, cache: Any, rows: torch.Tensor) -> Any:
        raise NotImplementedError

    def optimizer(self, cfg) -> torch.optim.Optimizer:
        raise NotImplementedError

    def save(self, root: str | Path, step: int, optimizer: torch.optim.Optimizer | None,
             state: dict[str, Any]) -> Path:
        raise NotImplementedError

    def weight_mismatches(self, state: dict[str, torch.Tensor]) -> list[str]:
        raise NotImplementedError

    def after_step(self) -> None:
        """Called after each optimizer step (nothing to do for most models)."""

    # -- shared --------------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def training(self) -> bool:
        return self.module.training

    def train(self, mode: bool = True) -> Policy:
        self.module.train(mode)
        return self

    def eval(self) -> Policy:
        return self.train(False)

    def parameters(self):
        return self.module.parameters()

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        bad = self.weight_mismatches(state)
        if bad:
            raise UserError(f"weights do not match the model: {'; '.join(bad[:5])}")
        self.module.load_state_dict(state, strict=False)  # strict: checked above (tied names may be absent)

    def frozen(self) -> Policy:
        """Eval mode, no gradients: a reference or teacher policy."""
        self.module.eval().requires_grad_(False)
        return self

    def check_prompt(self, i: int, prompt) -> None:
        if not prompt:
            raise UserError(f"prompt {i} is empty (needs at least one token)")
        if min(prompt) < 0 or max(prompt) >= self.vocab_size:
            raise UserError(f"prompt {i} has a token id outside the vocabulary [0, {self.vocab_size})")
