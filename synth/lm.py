"""The causal LM behind EntropyLong verification: token ids -> per-position entropies.

``LogitsLM`` wraps any causal LM given as a forward function (token ids -> next-token logits),
so SmolLM2-135M-Instruct (``load_hf_lm``, via ``core.local_lm``), any transformers causal LM
directory, or our own trained model can verify contexts. It runs in process because the
verification needs the full next-token distribution at every position, which an HTTP
completion endpoint does not return. Every failure — a missing or corrupt model, a forward
that raises — becomes an ``LMError`` with a one-line message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.errors import UserError

if TYPE_CHECKING:  # torch is imported lazily: building a config must not load it
    import torch

# forward(ids of shape (1, T), keep) -> logits of shape (keep, vocab) for the last `keep` positions
Forward = Callable[["torch.Tensor", int], "torch.Tensor"]


class LMError(UserError):
    """The verification LM could not be loaded or failed on an input."""


class LogitsLM:
    def __init__(
        self,
        forward: Forward,
        encode: Callable[[str], list[int]],
        decode: Callable[[list[int]], str],
        max_tokens: int,
        name: str = "lm",
    ):
        self._forward, self._encode, self._decode = forward, encode, decode
        self.max_tokens, self.name = max_tokens, name

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)

    def entropies(self, context: list[int], target: list[int]) -> np.ndarray:
        """Entropy (nats) of the model's distribution for ``target[1:]``, each predicted from
        ``context + target[:j]``: ``len(target) - 1`` values, comparable across contexts."""
        import torch

        if len(target) < 2:
            raise LMError(f"{self.name}: need at least 2 target tokens, got {len(target)}")
        if len(target) > self.max_tokens:
            raise LMError(f"{self.name}: target of {len(target)} tokens exceeds max_tokens={self.max_tokens}")
        # keep the context's end: the tokens nearest the target are the ones that can help it
        room = self.max_tokens - len(target)
        context = context[len(context) - room :] if room < len(context) else context
        ids = torch.tensor([list(context) + list(target)], dtype=torch.long)
        try:
            with torch.inference_mode():
                logits = self._forward(ids, len(target))
        except Exception as err:
            raise LMError(f"{self.name}: forward pass failed on {ids.shape[1]} tokens: {err}") from None
        logits = logits[:-1].float()  # the last position predicts past the target
        logp = torch.log_softmax(logits, dim=-1)
        return (-(logp.exp() * logp).sum(-1)).numpy().astype(np.float64)


def load_hf_lm(path: str | Path, max_tokens: int = 2048, threads: int = 0) -> LogitsLM:
    """A transformers causal LM directory (e.g. ``core.local_lm.obtain_smollm2()``) as a LogitsLM."""
    from core.local_lm import load_causal_lm

    path = Path(path)
    try:
        model, tok = load_causal_lm(path, threads=threads)
    except UserError as err:
        raise LMError(f"could not load the verification LM: {err}") from None
    except Exception as err:  # corrupt weights, unknown architecture, unreadable tokenizer
        raise LMError(
            f"could not load the verification LM from {path}: {type(err).__name__}: {err}"
        ) from None

    def forward(ids, keep: int):
        return model(input_ids=ids, logits_to_keep=keep).logits[0]

    return LogitsLM(
        forward,
        encode=lambda text: tok(text, add_special_tokens=False)["input_ids"],
        decode=lambda ids: tok.decode(ids),
        max_tokens=max_tokens,
        name=path.name,
    )
