"""The GLM-5 chat template: render OpenAI-style messages to text with loss-mask spans, parse
text back to messages, encode with the special tokens added to a tokenizer.

Layout (GLM-4.5/GLM-5 family, compact GLM-5 form without newlines after role tokens)::

    [gMASK]<sop><|system|>S<|user|>U<|assistant|><think>R</think>C<tool_call>NAME
    <arg_key>K</arg_key><arg_value>V</arg_value></tool_call><|observation|>
    <tool_response>T</tool_response><|assistant|><think>R2</think>C2<|user|>

A model turn ends when the model emits the next role token (``<|user|>`` after an answer,
``<|observation|>`` after tool calls), so that token is trained. The generation prompt is
``<|assistant|><think>`` (thinking on) or ``<|assistant|><think></think>`` (thinking off):
everything the model writes after it — reasoning, ``</think>``, content, tool calls, the
ending role token — is in the loss mask; system, user, observation and tool text never are.

Thinking modes (``--mode``):
- ``interleaved``: a thinking block before every assistant message (every answer and every
  tool call); thinking of earlier user turns is cleared (GLM's default ``clear_thinking``),
  so a conversation with N user turns becomes N samples, sample k training only the
  assistant messages of turn k (no trained turn ever has its own thinking hidden).
- ``preserved`` (``clear_thinking: false``): every thinking block is kept; one sample, every
  assistant message trained (long coding-agent runs).
- ``turn``: thinking on or off per user turn (a user message may carry ``"thinking": false``);
  an off turn renders an empty block as part of the prompt; cleared like ``interleaved``.

Tool-call argument values: strings are written raw, other JSON values as JSON; parsing uses
the record's ``tools`` schema when it names a property's type, else reads a value as JSON
when it is valid JSON and as a string otherwise.

``python -m training.chat_template render --messages M.jsonl --mode interleaved`` prints one
JSON object per sample: ``text`` and ``loss_mask`` (a list of [start, end) character spans of
trained text), plus ``line`` (input line) and ``sample`` (index within the conversation).
Bad conversations are counted rejects with a reason on stderr, never a crash.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import typer

from core.cli import user_errors

Mode = Literal["interleaved", "preserved", "turn"]
MODES = ("interleaved", "preserved", "turn")

PREFIX = "[gMASK]<sop>"
SYSTEM, USER, ASSISTANT, OBSERVATION = "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"
THINK, END_THINK = "<think>", "</think>"
TOOL_CALL, END_TOOL_CALL = "<tool_call>", "</tool_call>"
ARG_KEY, END_ARG_KEY, ARG_VALUE, END_ARG_VALUE = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
TOOL_RESPONSE, END_TOOL_RESPONSE = "<tool_response>", "</tool_response>"
EOS = "<|endoftext|>"
SPECIAL_TOKENS = [
    EOS, "[gMASK]", "<sop>", SYSTEM, USER, ASSISTANT, OBSERVATION, THINK, END_THINK,
    TOOL_CALL, END_TOOL_CALL, ARG_KEY, END_ARG_KEY, ARG_VALUE, END_ARG_VALUE, TOOL_RESPONSE, END_TOOL_RESPONSE,
]  # fmt: skip
SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t in sorted(SPECIAL_TOKENS, key=len, reverse=True)) + ")")
ROLE_TOKEN = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": OBSERVATION}
# rollouts stop when the model hands the turn over
STOP_TOKENS = [USER, OBSERVATION, EOS]
TOOLS_HEADER = "# Tools\nYou may call one or more functions. Their signatures:\n<tools>\n"
TOOLS_FOOTER = "</tools>"


class Reject(ValueError):
    """A conversation that cannot be rendered; ``reason`` is a short stable key for counting."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# -- validation / normalisation -------------------------------------------------------------


def _text(value: Any, where: str, allow_none: bool = False) -> str:
    if value is None and allow_none:
        return ""
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in value):
        value = "".join(str(p.get("text", "")) for p in value)  # OpenAI text parts
    if not isinstance(value, str):
        raise Reject("non_string_content", f"{where} is {type(value).__name__}")
    if SPECIAL_RE.search(value):
        raise Reject("reserved_token_in_content", f"{where} contains {SPECIAL_RE.search(value).group(0)}")
    return value


def _arguments(call: dict, where: str) -> dict[str, Any]:
    args = call.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise Reject("bad_tool_arguments", f"{where}: arguments are not JSON") from None
    if not isinstance(args, dict):
        raise Reject("bad_tool_arguments", f"{where}: arguments are not a JSON object")
    for k, v in args.items():
        _text(k, f"{where} argument name")
        _text(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False), f"{where} argument {k}")
    return args


def normalize(messages: Any) -> list[dict[str, Any]]:
    """Validate and return canonical messages (tool-call ids dropped, arguments a JSON string
    of an object, empty reasoning dropped). Raises ``Reject`` with a reason."""
    if not isinstance(messages, list) or not messages:
        raise Reject("no_messages")
    out: list[dict[str, Any]] = []
    pending_calls = 0  # tool calls of the last assistant message not yet answered
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise Reject("bad_message", f"message {i} is not an object")
        role = m.get("role")
        if role not in ROLE_TOKEN:
            raise Reject("unknown_role", f"message {i} has role {role!r}")
        where = f"message {i} ({role})"
        if role == "assistant":
            msg: dict[str, Any] = {"role": role, "content": _text(m.get("content"), where, allow_none=True)}
            reasoning = _text(m.get("reasoning_content"), f"{where} reasoning_content", allow_none=True)
            if reasoning:
                msg["reasoning_content"] = reasoning
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise Reject("bad_tool_call", f"{where}: tool_calls is not a list")
            norm_calls = []
            for j, c in enumerate(calls):
                fn = c.get("function", c) if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not fn.get("name"):
                    raise Reject("tool_call_without_name", f"{where} call {j}")
                name = _text(fn["name"], f"{where} call {j} name")
                args = _arguments(fn, f"{where} call {j}")
                norm_calls.append(
                    {"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                )
            if norm_calls:
                msg["tool_calls"] = norm_calls
            pending_calls = len(norm_calls)
        elif role == "tool":
            if pending_calls == 0:
                raise Reject("tool_result_without_call", where)
            pending_calls -= 1
            msg = {"role": role, "content": _text(m.get("content"), where)}
        else:
            msg = {"role": role, "content": _text(m.get("content"), where)}
            if role == "user" and m.get("thinking") is False:
                msg["thinking"] = False
            pending_calls = 0
        out.append(msg)
    if not any(m["role"] == "assistant" for m in out):
        raise Reject("no_assistant_message")
    first_user = next((i for i, m in enumerate(out) if m["role"] == "user"), None)
    if first_user is None or any(m["role"] == "assistant" for m in out[:first_user]):
        raise Reject("assistant_before_user")
    return out


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise Reject("bad_tools", "tools must be a list of objects")
    for t in tools:
        _text(json.dumps(t, ensure_ascii=False), "tools")
    return tools


# -- rendering -----------------------------------------------------------------------------------


@dataclass
class Sample:
    """One training sample: text pieces, each trained or not."""

    pieces: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, text: str, trained: bool = False) -> None:
        if text:
            self.pieces.append((text, trained))

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.pieces)

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Character [start, end) spans of trained text, adjacent pieces merged."""
        spans: list[tuple[int, int]] = []
        pos = 0
        for t, trained in self.pieces:
            if trained:
                if spans and spans[-1][1] == pos:
                    spans[-1] = (spans[-1][0], pos + len(t))
                else:
                    spans.append((pos, pos + len(t)))
            pos += len(t)
        return spans


def _render_assistant(s: Sample, m: dict, thinking: bool, show_reasoning: bool, trained: bool) -> None:
    """The assistant body after its ``<|assistant|>`` role token (the ending token is added
    as the next message's opener, or by ``_render`` at the end of a sample)."""
    s.add(THINK)
    if thinking:
        s.add((m.get("reasoning_content", "") if show_reasoning else "") + END_THINK, trained)
    else:
        s.add(END_THINK)  # thinking off: the empty block is part of the prompt
    body = m["content"]
    for c in m.get("tool_calls", []):
        body += TOOL_CALL + c["function"]["name"]
        for k, v in json.loads(c["function"]["arguments"]).items():
            v = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            body += f"{ARG_KEY}{k}{END_ARG_KEY}{ARG_VALUE}{v}{END_ARG_VALUE}"
        body += END_TOOL_CALL
    s.add(body, trained)


def _render(
    messages: list[dict], tools: list[dict], mode: Mode, show_from: int, train_from: int, upto: int
) -> Sample:
    """Render messages[:upto]. Reasoning is shown for assistant messages at index >= show_from
    (cleared to an empty block before it); those at index >= train_from are trained, together
    with the role token that ends them (the next message's opener, or an implied one)."""
    s = Sample()
    s.add(PREFIX)
    if tools:
        listing = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tools)
        s.add(SYSTEM + TOOLS_HEADER + listing + TOOLS_FOOTER)
    thinking, prev_trained = True, False
    for i, m in enumerate(messages[:upto]):
        role = m["role"]
        continues_observation = role == "tool" and i > 0 and messages[i - 1]["role"] == "tool"
        s.add("" if continues_observation else ROLE_TOKEN[role], prev_trained)
        if role == "user":
            thinking = mode != "turn" or m.get("thinking", True)
            s.add(m["content"])
        elif role == "system":
            s.add(m["content"])
        elif role == "tool":
            s.add(TOOL_RESPONSE + m["content"] + END_TOOL_RESPONSE)
        else:
            _render_assistant(s, m, thinking, i >= show_from, i >= train_from)
        prev_trained = role == "assistant" and i >= train_from
    if prev_trained:  # the sample ends with a trained answer: its ending token is implied
        s.add(OBSERVATION if messages[upto - 1].get("tool_calls") else USER, True)
    return s


def _last_user(msgs: list[dict], upto: int | None = None) -> int:
    return max(i for i, m in enumerate(msgs[:upto]) if m["role"] == "user")


def render(messages: Any, mode: Mode, tools: Any = None) -> list[Sample]:
    """Validated samples for one conversation (see the module docstring for the modes)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    msgs, tl = normalize(messages), _tools(tools)
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    if mode == "preserved":
        return [_render(msgs, tl, mode, 0, users[0], len(msgs))]
    samples = []
    for k, u in enumerate(users):
        end = users[k + 1] if k + 1 < len(users) else len(msgs)
        if any(m["role"] == "assistant" for m in msgs[u:end]):
            samples.append(_render(msgs, tl, mode, u, u, end))
    return samples


def generation_prompt(messages: Any, tools: Any = None, mode: Mode = "interleaved") -> str:
    """Prompt text for the next assistant message. Thinking after the last user message is
    kept (all of it in preserved mode); in turn mode the last user message's ``thinking``
    flag decides between ``<think>`` and an empty block."""
    msgs = normalize(messages + [{"role": "assistant", "content": ""}])[:-1]
    last = _last_user(msgs)
    s = _render(msgs, _tools(tools), mode, 0 if mode == "preserved" else last, len(msgs) + 1, len(msgs))
    thinking = mode != "turn" or msgs[last].get("thinking", True)
    return s.text + ASSISTANT + THINK + ("" if thinking else END_THINK)


# -- parsing -------------------------------------------------------------------------------------


def _arg_types(tools: list[dict]) -> dict[tuple[str, str], str]:
    """(function name, argument) -> JSON-schema type, from OpenAI-style tool definitions."""
    types = {}
    for t in tools:
        fn = t.get("function", t)
        props = (fn.get("parameters") or {}).get("properties") or {}
        for k, spec in props.items():
            if isinstance(spec, dict) and isinstance(spec.get("type"), str):
                types[(fn.get("name"), k)] = spec["type"]
    return types


def _arg_value(raw: str, typ: str | None) -> Any:
    if typ == "string":
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        if typ is not None:
            raise ValueError(f"argument value {raw[:40]!r} is not valid JSON for type {typ}") from None
        return raw


def parse(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) from rendered text, in ``normalize``'s canonical form (reasoning
    included wherever a thinking block is non-empty). Raises ValueError on malformed text."""
    if not text.startswith(PREFIX):
        raise ValueError(f"text does not start with {PREFIX}")
    parts = [p for p in SPECIAL_RE.split(text[len(PREFIX) :]) if p]
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    types: dict[tuple[str, str], str] = {}
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
            body = take_text()
            if not messages and not tools and body.startswith(TOOLS_HEADER) and body.endswith(TOOLS_FOOTER):
                listing = body[len(TOOLS_HEADER) : -len(TOOLS_FOOTER)]
                tools = [json.loads(line) for line in listing.splitlines() if line]
                types = _arg_types(tools)
            else:
                messages.append({"role": "system", "content": body})
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
            expect(THINK)
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


# -- tokens ----------------------------------------------------------------------------------------


def add_special_tokens(tok):
    """Add the template's special tokens to an HF ``tokenizers.Tokenizer`` (in place; tokens
    it already has keep their ids) and return it."""
    missing = [t for t in SPECIAL_TOKENS if tok.token_to_id(t) is None]
    if missing:
        from tokenizers import AddedToken

        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    return tok


def encode(sample: Sample, tok) -> tuple[list[int], list[int]]:
    """(token ids, per-token loss mask) of a sample. Trained/untrained boundaries sit at
    special tokens, so encoding piece by piece gives exactly ``tok.encode(sample.text)``."""
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in sample.pieces:
        for part in SPECIAL_RE.split(text):
            if not part:
                continue
            special = tok.token_to_id(part) if SPECIAL_RE.fullmatch(part) else None
            if SPECIAL_RE.fullmatch(part) and special is None:
                raise ValueError(f"tokenizer lacks the special token {part} (call add_special_tokens)")
            got = [special] if special is not None else tok.encode(part, add_special_tokens=False).ids
            ids += got
            mask += [int(trained)] * len(got)
    return ids, mask


def stop_token_ids(tok) -> list[int]:
    return [tok.token_to_id(t) for t in STOP_TOKENS if tok.token_to_id(t) is not None]


# -- command line ------------------------------------------------------------------------------------


def conversation_of(record: Any) -> tuple[Any, Any]:
    """(messages, tools) of one JSONL record: a message list, ``{"messages": [...], "tools":
    [...]}`` (OpenAI fine-tuning format) or ShareGPT ``{"conversations": [...]}``."""
    if isinstance(record, list):
        return record, None
    if isinstance(record, dict) and "messages" in record:
        return record["messages"], record.get("tools")
    if isinstance(record, dict) and "conversations" in record:
        from training.sft.formats import sharegpt_to_messages

        return sharegpt_to_messages(record["conversations"]), record.get("tools")
    raise Reject("unknown_record_format", "expected a message list, {messages: ...} or {conversations: ...}")


app = typer.Typer(add_completion=False, help="GLM-5 chat template.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """GLM-5 chat template tools."""


@app.command("render")
@user_errors
def render_cmd(
    messages: Path = typer.Option(..., help="JSONL: one conversation per line (OpenAI messages or ShareGPT)"),
    mode: str = typer.Option("interleaved", help="thinking mode: interleaved | preserved | turn"),
) -> None:
    """Print one JSON object per sample: text and loss_mask (trained [start, end) character spans)."""
    from core.errors import InputError

    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not messages.is_file():
        raise InputError(f"{messages}: no such file")
    rejects: dict[str, int] = {}
    n_in = n_out = 0
    with open(messages, encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            n_in += 1
            try:
                msgs, tools = conversation_of(json.loads(line))
                samples = render(msgs, mode, tools)  # type: ignore[arg-type]
            except json.JSONDecodeError:
                reason = "bad_json"
                rejects[reason] = rejects.get(reason, 0) + 1
                print(f"reject line {line_no}: {reason}", file=sys.stderr)
                continue
            except Reject as err:
                rejects[err.reason] = rejects.get(err.reason, 0) + 1
                print(f"reject line {line_no}: {err}", file=sys.stderr)
                continue
            for k, s in enumerate(samples):
                n_out += 1
                print(json.dumps({"line": line_no, "sample": k, "text": s.text, "loss_mask": [list(x) for x in s.spans]}, ensure_ascii=False))
    summary = ", ".join(f"{k}={v}" for k, v in sorted(rejects.items())) or "none"
    print(f"conversations {n_in}: rendered {n_in - sum(rejects.values())} -> {n_out} samples; rejected: {summary}", file=sys.stderr)


if __name__ == "__main__":
    app()
