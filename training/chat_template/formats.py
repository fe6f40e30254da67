"""Input formats for chat data, converted to OpenAI-style message lists.

ShareGPT (LLaMA-Factory's convention): ``{"conversations": [{"from": ..., "value": ...}]}``
with ``from`` in human/user, gpt/assistant, system, function_call (an assistant tool call:
``value`` is JSON ``{"name": ..., "arguments": {...}}``), observation/tool (a tool result).
Consecutive function_call turns become one assistant message with several calls. Unknown
``from`` values are kept as that role, so ``normalize`` rejects them as ``unknown_role``.

Typed parts (LLaMA-Factory's messages format): ``content`` is a list of
``{"type": "text" | "reasoning" | "tool_call", "value": ...}``; text parts become the content,
reasoning parts ``reasoning_content``, tool_call parts (``value`` is JSON ``{"name", "arguments"}``)
``tool_calls``. Other part types (images, audio) are left in place, so ``normalize`` rejects
them as ``non_string_content``; OpenAI's own text parts (``{"type": "text", "text": ...}``) are
read by ``normalize``.
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


_PART_TYPES = {"text", "reasoning", "tool_call"}


def _typed_parts_message(m: Any) -> Any:
    """One message with LLaMA-Factory typed parts as an OpenAI-style message; anything else as is."""
    parts = m.get("content") if isinstance(m, dict) else None
    if not (isinstance(parts, list) and parts and all(isinstance(p, dict) and "value" in p for p in parts)):
        return m
    if not all(p.get("type") in _PART_TYPES and isinstance(p["value"], str) for p in parts):
        return m  # an image or a non-string value: normalize() rejects it with a reason
    out = {k: v for k, v in m.items() if k != "content"}
    out["content"] = "".join(p["value"] for p in parts if p["type"] == "text")
    reasoning = [p["value"] for p in parts if p["type"] == "reasoning"]
    if reasoning:
        out["reasoning_content"] = "\n".join(reasoning)
    calls = []
    for p in parts:
        if p["type"] == "tool_call":
            try:
                call = json.loads(p["value"])
            except json.JSONDecodeError:
                call = {"arguments": p["value"]}  # no name: rejected as tool_call_without_name
            call = call if isinstance(call, dict) else {}
            calls.append({"type": "function", "function": {"name": call.get("name"), "arguments": call.get("arguments", {})}})
    if calls:
        out["tool_calls"] = calls
    return out


def conversation_of(record: Any) -> tuple[Any, Any]:
    """(messages, tools) of one JSONL record: a message list, ``{"messages": [...], "tools":
    [...]}`` (OpenAI fine-tuning format) or ShareGPT ``{"conversations": [...]}``."""
    if isinstance(record, list):
        return record, None
    if isinstance(record, dict) and "messages" in record:
        msgs = record["messages"]
        if isinstance(msgs, list):
            msgs = [_typed_parts_message(m) for m in msgs]
        return msgs, record.get("tools")
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
