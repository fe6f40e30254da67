"""Text <-> tokens of our GLM policy: a ``tokenizers`` tokenizer plus the GLM-5 chat template
(``training.policy.hf.HFCodec`` is the same API over a transformers tokenizer's own template).

The orchestrator renders a task's prompt messages once (``chat_prompt``) and trains on exactly
the ids it sent and the ids the server sampled; ``chat_reply`` only turns sampled ids back into
an OpenAI-style assistant message (reasoning, content, tool calls) for graders and the unified
message list — it never feeds the trainer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import InputError, UserError
from training import chat_template as ct


class Codec:
    def __init__(self, tok):
        self.tok = ct.add_special_tokens(tok)
        self.stop_ids = ct.stop_token_ids(self.tok)
        self.observation_id = self.tok.token_to_id(ct.OBSERVATION)  # a turn ending here hands over to tools
        self._stop_text = tuple(ct.STOP_TOKENS)
        # a word-level vocabulary maps words it lacks to its unknown token: such a prompt is refused,
        # never sent to the model with pieces silently replaced (byte-level BPE has no unknown token)
        self.unk = (json.loads(self.tok.to_str()).get("model") or {}).get("unk_token")
        self.unk_id = self.tok.token_to_id(self.unk) if self.unk else None

    @classmethod
    def load(cls, path: str | Path) -> Codec:
        from tokenizers import Tokenizer

        if not Path(path).is_file():
            raise InputError(f"tokenizer not found: {path}")
        return cls(Tokenizer.from_file(str(path)))

    def save(self, directory: Path) -> None:
        """``tokenizer.json`` (the template's tokens included) beside a checkpoint's weights."""
        self.tok.save(str(Path(directory) / "tokenizer.json"))

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        enc = self.tok.encode(text, add_special_tokens=False)
        if self.unk_id is not None and self.unk_id in enc.ids:
            missing = [text[a:b] for t, (a, b) in zip(enc.ids, enc.offsets, strict=True)
                       if t == self.unk_id and text[a:b] != self.unk]
            if missing:
                raise UserError(f"text has {len(missing)} piece(s) outside the tokenizer's vocabulary "
                                f"(would become {self.unk}): {missing[:5]}")
        return enc.ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return self.tok.decode(ids, skip_special_tokens=skip_special)

    def token(self, tid: int) -> str:
        return self.tok.id_to_token(tid) or ""

    def chat_prompt(self, messages: Any, thinking: bool = False, tools: Any = None) -> list[int]:
        """Ids of the generation prompt (``...<|assistant|><think>``, or an empty thinking block
        when ``thinking`` is off)."""
        if not isinstance(messages, list) or not messages:
            raise UserError("messages must be a non-empty list")
        msgs = [dict(m) if isinstance(m, dict) else m for m in messages]
        if not thinking:  # turn-level switch: the last user turn says thinking off
            users = [i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "user"]
            if users:
                msgs[users[-1]]["thinking"] = False
        try:
            text = ct.generation_prompt(msgs, tools, mode="turn")
        except (ValueError, TypeError, KeyError) as err:
            raise UserError(f"messages cannot be rendered: {err}") from None
        return self.encode(text)

    def hands_over(self, ids: list[int]) -> bool:
        """Whether a turn that stopped handed over to the tools: it ended with ``<|observation|>``."""
        return ids[-1:] == [self.observation_id]

    def after_turn(self, last: int | None, new: list[dict[str, Any]], thinking: bool = False) -> list[int] | None:
        """Ids of ``new`` tool/user messages after a model turn whose last sampled id is ``last``, or
        None when they cannot follow it as the template would (a user turn after a turn that handed
        over to its tools)."""
        handed_over = last == self.observation_id
        if new[0].get("role") == "user" and handed_over:
            return None
        ids, _ = self.observation(new, thinking)
        if new[0].get("role") == "tool" and not handed_over:  # the model stopped otherwise: the role token is ours
            ids = [self.observation_id] + ids
        if new[0].get("role") == "user" and last == self.tok.token_to_id(ct.USER):  # its own stop token opened it
            ids = ids[1:]
        return ids

    def observation(self, messages: list[dict[str, Any]], thinking: bool = False) -> tuple[list[int], list[dict]]:
        """(ids, messages as rendered) of what an environment returns after a model turn that
        ended with ``<|observation|>``: tool results (and any next user instruction), then the
        generation prompt (``chat_template.continuation``). Environment text is defused first:
        a command that prints a template token cannot forge a role turn."""
        msgs = [{"role": m.get("role"), "content": ct.defuse(str(m.get("content") or ""))} for m in messages]
        try:
            text = ct.continuation(msgs, thinking)
        except ValueError as err:
            raise UserError(f"observation cannot be rendered: {err}") from None
        return self.encode(text), msgs

    def chat_reply(self, ids: list[int], thinking: bool = False) -> dict[str, Any]:
        """The assistant message a completion encodes; falls back to plain content when the
        model wrote something the template cannot parse (a truncated tool call, say)."""
        text = self.decode(ids, skip_special=False)
        while text.endswith(self._stop_text):
            text = text[: -len(next(s for s in self._stop_text if text.endswith(s)))]
        head = ct.PREFIX + ct.ASSISTANT + ct.THINK + ("" if thinking else ct.END_THINK)
        try:
            messages, _ = ct.parse(head + text)
        except ValueError:
            messages = []
        if len(messages) == 1 and messages[0]["role"] == "assistant":
            return messages[0]
        return {"role": "assistant", "content": self.decode(ids)}
