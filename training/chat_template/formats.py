"""Input formats for chat data, converted to OpenAI-style message lists.

ShareGPT (LLaMA-Factory's convention): ``{"conversations": [{"from": ..., "value": ...}]}``
with ``from`` in human/user, gpt/assistant, system, function_call (an assistant tool call:
``value`` is JSON ``{"name": ..., "arguments": {...}}``), observation/tool (a tool result).
Consecutive function_call turns become one assistant message with several calls. Unknown
``from`` values are kept as that role, so ``normalize`` rejects them as ``unknown_role``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from training.chat_template.template import Reject

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
         "system": "system", "observation": "tool", "tool": "tool", "function": "tool"}  # fmt: skip


def sharegpt_to_messages(turns: Any) -> list[dict[str, Any]]:
    if not isinstance(turns, list):
        return turns  # normalize() rejects it with a reason
    out: list[dict[str, Any]] = []
    for t in turns:
        if not isinstance(t, dict):
            out.append(t)
            continue
        src, value = t.get("from"), t.get("value")
        if src == "function_call":
            try:
                call = json.loads(value) if isinstance(value, str) else value
            except json.JSONDecodeError:
                call = {"arguments": value}  # no name: rejected as tool_call_without_name
            if not isinstance(call, dict):
                call = {}
            fn = {"name": call.get("name"), "arguments": call.get("arguments", {})}
            if out and isinstance(out[-1], dict) and out[-1].get("role") == "assistant":
                out[-1].setdefault("tool_calls", []).append({"type": "function", "function": fn})
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": fn}]})
            continue
        out.append({"role": ROLES.get(src, src), "content": value})
    return out


def conversation_of(record: Any) -> tuple[Any, Any]:
    """(messages, tools) of one JSONL record: a message list, ``{"messages": [...], "tools":
    [...]}`` (OpenAI fine-tuning format) or ShareGPT ``{"conversations": [...]}``."""
    if isinstance(record, list):
        return record, None
    if isinstance(record, dict) and "messages" in record:
        return record["messages"], record.get("tools")
    if isinstance(record, dict) and "conversations" in record:
        return sharegpt_to_messages(record["conversations"]), record.get("tools")
    raise Reject("unknown_record_format", "expected a message list, {messages: ...} or {conversations: ...}")


def conversation_lines(path: Path) -> Iterator[tuple[int, Any | None]]:
    """(line number, parsed record, or None when the line is not JSON) for every non-blank line
    of a conversations JSONL file. Not ``core.io.iter_jsonl``, which stops at the first bad
    line: here a bad line is one counted reject (``bad_json``) and the rest is still read."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield no, json.loads(line)
                except json.JSONDecodeError:
                    yield no, None
