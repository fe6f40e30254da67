"""The GLM-5 chat template: render OpenAI-style messages to text with loss-mask spans, parse
text back to messages, encode with the special tokens added to a tokenizer.

Layout (GLM-5's template, the compact GLM-4.7 form: no newline after role tokens)::

    [gMASK]<sop><|system|>S<|user|>U<|assistant|><think>R</think>C<tool_call>NAME
    <arg_key>K</arg_key><arg_value>V</arg_value></tool_call><|observation|>
    <tool_response>T</tool_response><|assistant|><think>R2</think>C2<|user|>

(one line in the real text). With ``tools`` the conversation opens with GLM-5's tool block,
``<|system|>`` + ``TOOLS_HEADER`` + one JSON line per tool + ``TOOLS_FOOTER``, word for word.
Assistant content and reasoning are stripped of surrounding whitespace, and content with its
thinking inline (``<think>R</think>A``, no ``reasoning_content``) is split, as the GLM template
does. An assistant message whose thinking is not shown (cleared from an earlier user turn, or
a thinking-off turn) renders GLM-5's lone ``</think>`` separator; one whose thinking is shown
renders ``<think>R</think>`` even when R is empty (what the model writes after the
``<|assistant|><think>`` generation prompt, so re-rendering stays append-only: GLM-5.1's rule).

A model turn ends when the model emits the next role token (``<|user|>`` after an answer,
``<|observation|>`` after tool calls), so that token is trained. The generation prompt is
``<|assistant|><think>`` (thinking on) or ``<|assistant|></think>`` (thinking off):
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
  an off turn renders the empty block (``</think>``) as part of the prompt; cleared like
  ``interleaved``.

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
from dataclasses import dataclass, field
from typing import Any, Literal

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
# GLM-5's tool block, verbatim (the footer's example call holds special tokens, as in GLM's)
TOOLS_HEADER = (
    "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
TOOLS_FOOTER = (
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
    "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
)


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
        if not all(isinstance(p.get("text"), str) for p in value):  # never read a part as empty text
            raise Reject("non_string_content", f"{where} has a text part without a string 'text'")
        value = "".join(p["text"] for p in value)  # OpenAI text parts
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
    of an object, assistant content and reasoning stripped, empty reasoning dropped). Raises ``Reject`` with a reason."""
    if not isinstance(messages, list) or not messages:
        raise Reject("no_messages")
    out: list[dict[str, Any]] = []
    pending_calls = 0  # tool calls of the last assistant message not yet answered
    pending_ids: set[str] = set()  # their ids, when the data has them
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise Reject("bad_message", f"message {i} is not an object")
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLE_TOKEN:  # an unhashable role is no TypeError
            raise Reject("unknown_role", f"message {i} has role {role!r}")
        where = f"message {i} ({role})"
        if role == "assistant":
            content, reasoning = m.get("content"), m.get("reasoning_content")
            if reasoning is None and isinstance(content, str) and END_THINK in content:
                # thinking inline in the content ("<think>R</think>A"): split as GLM's template does
                head, content = content.split(END_THINK, 1)
                reasoning = head.split(THINK)[-1]
            # stripped as GLM's template strips them (the canonical form is what renders)
            msg: dict[str, Any] = {"role": role, "content": _text(content, where, allow_none=True).strip()}
            reasoning = _text(reasoning, f"{where} reasoning_content", allow_none=True).strip()
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
            pending_ids = {c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]}
        elif role == "tool":
            if pending_calls == 0:
                raise Reject("tool_result_without_call", where)
            ref = m.get("tool_call_id")
            if pending_ids and isinstance(ref, str) and ref:
                if ref not in pending_ids:
                    raise Reject("tool_result_without_call", f"{where}: tool_call_id {ref!r} answers no pending call")
                pending_ids.discard(ref)
            pending_calls -= 1
            msg = {"role": role, "content": _text(m.get("content"), where)}
        else:
            msg = {"role": role, "content": _text(m.get("content"), where)}
            if role == "user" and m.get("thinking") is False:
                msg["thinking"] = False
            pending_calls, pending_ids = 0, set()
        out.append(msg)
    if not any(m["role"] == "assistant" for m in out):
        raise Reject("no_assistant_message")
    first_user = next((i for i, m in enumerate(out) if m["role"] == "user"), None)
    if first_user is None or any(m["role"] == "assistant" for m in out[:first_user]):
        raise Reject("assistant_before_user")
    return out


def _tools(tools: Any) -> list[dict[str, Any]]:
    if isinstance(tools, str):  # ShareGPT data (LLaMA-Factory, glaive) stores the list as a JSON string
        try:
            tools = json.loads(tools) if tools.strip() else None
        except json.JSONDecodeError:
            raise Reject("bad_tools", "tools is a string that is not JSON") from None
    if tools is None or tools == []:
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
    if thinking and show_reasoning:
        s.add(THINK)  # the generation prompt's last token
        s.add(m.get("reasoning_content", "") + END_THINK, trained)
    else:
        s.add(END_THINK)  # cleared or thinking off: GLM-5's lone separator, part of the prompt
    body = m["content"]
    for c in m.get("tool_calls", []):
        body += TOOL_CALL + c["function"]["name"]
        for k, v in json.loads(c["function"]["arguments"]).items():
            v = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            body += f"{ARG_KEY}{k}{END_ARG_KEY}{ARG_VALUE}{v}{END_ARG_VALUE}"
        body += END_TOOL_CALL
    s.add(body, trained)


def _tool_response(content: str) -> str:
    return TOOL_RESPONSE + content + END_TOOL_RESPONSE


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
    ends = ""  # the token that ends the previous (trained) assistant message
    for i, m in enumerate(messages[:upto]):
        role = m["role"]
        continues_observation = role == "tool" and i > 0 and messages[i - 1]["role"] == "tool"
        # the next role token is trained only when it is the stop token the model emits there
        # (after tool calls <|observation|>, after an answer <|user|>): never <|assistant|> or
        # <|system|> when the data has two assistant messages in a row or a system message next
        s.add("" if continues_observation else ROLE_TOKEN[role], prev_trained and ROLE_TOKEN[role] == ends)
        if role == "user":
            thinking = mode != "turn" or m.get("thinking", True)
            s.add(m["content"])
        elif role == "system":
            s.add(m["content"])
        elif role == "tool":
            s.add(_tool_response(m["content"]))
        else:
            _render_assistant(s, m, thinking, i >= show_from, i >= train_from)
        prev_trained = role == "assistant" and i >= train_from
        ends = OBSERVATION if m.get("tool_calls") else USER
    if prev_trained:  # the sample ends with a trained answer: its ending token is implied
        s.add(ends, True)
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
    if not isinstance(messages, list):  # rollouts and datasets are untrusted: a reason, not a TypeError
        raise Reject("no_messages")
    msgs = normalize(messages + [{"role": "assistant", "content": ""}])[:-1]
    last = _last_user(msgs)
    s = _render(msgs, _tools(tools), mode, 0 if mode == "preserved" else last, len(msgs) + 1, len(msgs))
    thinking = mode != "turn" or msgs[last].get("thinking", True)
    return s.text + ASSISTANT + (THINK if thinking else END_THINK)


def defuse(text: str) -> str:
    """Environment text (a file, a command's output) with every template token broken by a
    zero-width space: an observation that prints ``<|user|>`` must not become a role token."""
    return SPECIAL_RE.sub(lambda m: m.group(0)[:1] + "\u200b" + m.group(0)[1:], text)


def continuation(messages: Any, thinking: bool = True) -> str:
    """The text after a model turn that handed over with ``<|observation|>``: its tool results
    (``tool`` messages, one ``<tool_response>`` each; the role token is the model's own, already
    sampled), any next ``user`` instruction, then the generation prompt. Appending it to the
    sampled tokens gives what ``generation_prompt`` renders for the whole conversation within a
    user turn, so a multi-turn rollout's context stays append-only."""
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise Reject("no_messages")
    text, first = "", True
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if not (first or messages[i - 1].get("role") == "tool"):
                raise Reject("tool_result_without_call", f"message {i} follows a user turn")
            text += _tool_response(_text(m.get("content"), f"message {i} (tool)"))
        elif role == "user":
            text += USER + _text(m.get("content"), f"message {i} (user)")
        else:
            raise Reject("unknown_role", f"message {i}: an observation holds tool results and user turns, not {role!r}")
        first = False
    return text + ASSISTANT + (THINK if thinking else END_THINK)
