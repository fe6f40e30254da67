"""Parse rendered GLM-5 chat text back into messages (the inverse of ``render``)."""

from __future__ import annotations

import json
from typing import Any

from training.chat_template.template import (
    ARG_KEY,
    ARG_VALUE,
    ASSISTANT,
    END_ARG_KEY,
    END_ARG_VALUE,
    END_THINK,
    END_TOOL_CALL,
    END_TOOL_RESPONSE,
    OBSERVATION,
    PREFIX,
    SPECIAL_RE,
    SYSTEM,
    THINK,
    TOOL_CALL,
    TOOL_RESPONSE,
    TOOLS_FOOTER,
    TOOLS_HEADER,
    USER,
)  # fmt: skip


def _properties(fn: dict) -> dict[str, Any]:
    """Argument specs of one tool: JSON schema's ``parameters.properties``, or the flat layout
    of ToolBench/xLAM data where ``parameters`` maps each argument to its spec directly."""
    params = fn.get("parameters") or {}
    if not isinstance(params, dict):
        return {}
    if isinstance(params.get("properties"), dict):
        return params["properties"]
    if params.get("type") == "object":
        return {}
    return {k: v for k, v in params.items() if isinstance(v, dict)}


def _arg_types(tools: list[dict]) -> dict[tuple[str, str], str]:
    """(function name, argument) -> type, from tool definitions. Python-style names of the flat
    layout ("str", "str, optional") count as JSON schema's "string"."""
    types = {}
    for t in tools:
        fn = t.get("function", t)
        if not isinstance(fn, dict):
            continue
        for k, spec in _properties(fn).items():
            if isinstance(spec, dict) and isinstance(spec.get("type"), str):
                typ = spec["type"].split(",")[0].strip()
                types[(fn.get("name"), k)] = "string" if typ in ("str", "string") else typ
    return types


def _arg_value(raw: str, typ: str | None) -> Any:
    """A string argument is written raw, any other value as JSON (GLM's template): read it as
    JSON unless the schema says string; text that is not JSON is the string it is."""
    if typ == "string":
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) from rendered text, in ``normalize``'s canonical form (reasoning
    included wherever a thinking block is non-empty). Raises ValueError on malformed text."""
    if not text.startswith(PREFIX):
        raise ValueError(f"text does not start with {PREFIX}")
    body = text[len(PREFIX) :]
    tools: list[dict[str, Any]] = []
    if body.startswith(SYSTEM + TOOLS_HEADER):  # cut out whole: its footer holds special tokens
        end = body.find(TOOLS_FOOTER)
        if end < 0:
            raise ValueError("tool block without its footer")
        tools = [json.loads(line) for line in body[len(SYSTEM + TOOLS_HEADER) : end].splitlines() if line]
        body = body[end + len(TOOLS_FOOTER) :]
    types = _arg_types(tools)
    parts = [p for p in SPECIAL_RE.split(body) if p]
    messages: list[dict[str, Any]] = []
    i = 0

    def take_text() -> str:
        nonlocal i
        if i < len(parts) and not SPECIAL_RE.fullmatch(parts[i]):
            i += 1
            return parts[i - 1]
        return ""

    def expect(token: str) -> None:
        nonlocal i
        if i >= len(parts) or parts[i] != token:
            got = parts[i] if i < len(parts) else "end of text"
            raise ValueError(f"expected {token} at part {i}, got {got[:40]!r}")
        i += 1

    while i < len(parts):
        tok = parts[i]
        i += 1
        if i == len(parts) and tok in (USER, OBSERVATION) and messages and messages[-1]["role"] == "assistant":
            break  # the implied ending token of a final answer
        if tok == SYSTEM:
            messages.append({"role": "system", "content": take_text()})
        elif tok == USER:
            messages.append({"role": "user", "content": take_text()})
        elif tok == OBSERVATION:
            if i >= len(parts) or parts[i] != TOOL_RESPONSE:
                raise ValueError("observation without a tool response")
            while i < len(parts) and parts[i] == TOOL_RESPONSE:
                i += 1
                messages.append({"role": "tool", "content": take_text()})
                expect(END_TOOL_RESPONSE)
        elif tok == ASSISTANT:
            msg: dict[str, Any] = {"role": "assistant"}
            reasoning = ""
            if i < len(parts) and parts[i] == THINK:  # else the lone </think> of a hidden block
                i += 1
                reasoning = take_text()
            expect(END_THINK)
            msg["content"] = take_text()
            if reasoning:
                msg["reasoning_content"] = reasoning
            calls = []
            while i < len(parts) and parts[i] == TOOL_CALL:
                i += 1
                name = take_text()
                if not name:
                    raise ValueError("tool call without a name")
                args: dict[str, Any] = {}
                while i < len(parts) and parts[i] == ARG_KEY:
                    i += 1
                    key = take_text()
                    expect(END_ARG_KEY)
                    expect(ARG_VALUE)
                    args[key] = _arg_value(take_text(), types.get((name, key)))
                    expect(END_ARG_VALUE)
                expect(END_TOOL_CALL)
                calls.append({"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
        else:
            raise ValueError(f"unexpected {tok[:40]!r} at part {i - 1}")
    return messages, tools
