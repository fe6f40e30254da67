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
        role = ROLES.get(src, src) if isinstance(src, str) else src  # a list is unhashable: normalize rejects it
        out.append({"role": role, "content": value})
    return out


_PART_TYPES = {"text", "reasoning", "tool_call"}


def _typed_parts_message(m: Any) -> Any:
    """One message with LLaMA-Factory typed parts as an OpenAI-style message; anything else as is."""
    parts = m.get("content") if isinstance(m, dict) else None
    if not (isinstance(parts, list) and parts and all(isinstance(p, dict) and "value" in p for p in parts)):
        return m
    if not all(isinstance(p.get("type"), str) and p["type"] in _PART_TYPES and isinstance(p["value"], str) for p in parts):
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


def alpaca_to_messages(record: dict) -> list[Any]:
    """Alpaca (``instruction``, optional ``input``, ``output``, ``system``, ``history`` as
    [[user, assistant], ...]), as LLaMA-Factory reads it: the prompt is the instruction and the
    input joined by a newline. Non-string fields are kept, so ``normalize`` rejects them."""
    msgs: list[Any] = []
    if record.get("system"):
        msgs.append({"role": "system", "content": record["system"]})
    history = record.get("history") or []
    if not isinstance(history, list):
        history = [history]  # normalize() rejects the turn it makes
    for pair in history:
        if isinstance(pair, list) and len(pair) == 2:
            msgs += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
        else:
            msgs.append(pair)  # not a [user, assistant] pair: rejected as bad_message
    prompt, extra = record["instruction"], record.get("input")
    if isinstance(prompt, str) and isinstance(extra, str) and extra:
        prompt = prompt + "\n" + extra
    elif extra not in (None, ""):
        prompt = extra  # not a string: rejected as non_string_content, never dropped
    msgs += [{"role": "user", "content": prompt}, {"role": "assistant", "content": record["output"]}]
    return msgs


def conversation_of(record: Any) -> tuple[Any, Any]:
    """(messages, tools) of one JSONL record: a message list, ``{"messages": [...], "tools":
    [...]}`` (OpenAI fine-tuning format), ShareGPT ``{"conversations": [...]}`` or Alpaca
    ``{"instruction", "input", "output"}``."""
    if isinstance(record, list):
        return record, None
    if isinstance(record, dict) and "messages" in record:
        msgs = record["messages"]
        if isinstance(msgs, list):
            msgs = [_typed_parts_message(m) for m in msgs]
        return msgs, record.get("tools")
    if isinstance(record, dict) and "conversations" in record:
        return sharegpt_to_messages(record["conversations"]), record.get("tools")
    if isinstance(record, dict) and "instruction" in record and "output" in record:
        return alpaca_to_messages(record), None
    raise Reject("unknown_record_format", "expected a message list, {messages}, {conversations} or {instruction, output}")


def _json_array(path: Path) -> list | None:
    """The records of a file that is one JSON array (how ShareGPT and LLaMA-Factory ship their
    ``.json`` datasets), or None when the file is JSONL: its first line then parses alone (a
    message list on one line is a JSONL record) or the file does not start with ``[``."""
    with open(path, "rb") as f:
        first = next((line for line in f if line.strip()), b"")
    if not first.lstrip().startswith(b"["):
        return None
    try:
        json.loads(first)
        return None
    except (json.JSONDecodeError, UnicodeDecodeError):
        pass
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # read line by line: every bad line a counted reject
    return data if isinstance(data, list) else None


def conversation_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed record) for every non-blank line of a conversations JSONL file; a
    line that is not UTF-8 JSON gives a ``Reject`` (``undecodable_text`` or ``bad_json``) in
    place of its record, never text with replaced bytes. Not ``core.io.iter_jsonl``, which
    stops at the first bad line: here a bad line is one counted reject and the rest is read.
    A file that is one JSON array gives its elements, numbered from 1 as if they were lines."""
    records = _json_array(path)
    if records is not None:
        yield from enumerate(records, 1)
        return
    with open(path, "rb") as f:
        for no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield no, json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                yield no, Reject("undecodable_text", f"byte {e.start} is not UTF-8")
            except json.JSONDecodeError as e:
                yield no, Reject("bad_json", e.msg)
