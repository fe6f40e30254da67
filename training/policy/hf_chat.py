"""Tool use with a transformers tokenizer's own chat template: one rule for SFT samples
(``training.sft.hf_data``) and for multi-turn rollouts (``HFCodec``).

GLM-5's template (``training.chat_template``) has its own tool block, ``<tool_call>`` syntax and an
``<|observation|>`` token that hands a turn over to the tools. A Hugging Face model brings its own
template instead:

* ``fold_for_template``: a template that does not mention ``tools`` / ``tool_calls`` /
  ``reasoning_content`` (SmolLM2's) would drop them silently; the tool list goes into a system
  message (``Tools:`` and one JSON schema per line), each call into the assistant's content as one
  JSON line ``{"name": ..., "arguments": ...}``, reasoning as ``<think>R</think>``. SFT trains that
  format and rollouts prompt with it, so what a model learns is what is parsed.
* ``parse_reply``: the assistant message of sampled text, ``tool_calls`` in OpenAI's shape, read
  from those JSON lines and from ``<tool_call>{...}</tool_call>`` blocks (what Qwen2.5/3, Hermes or
  SmolLM3 write natively).
* ``continuation``: the text after a model turn that called tools — the tool results and the next
  generation prompt as the template renders them, cut where the model's own sampled end-of-turn
  token ends, so that the context stays append-only (token in, token out: nothing already sampled
  is re-tokenised). A template whose rendering of the earlier turns changes once tool results follow
  cannot be continued that way: that is refused, not approximated.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.errors import UserError

CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_PROBE = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]


def fold_for_template(msgs: list[dict], tools: list | None, template: str) -> list[dict]:
    """Messages the template can render without losing content (see the module docstring)."""
    out = []
    if tools and "tools" not in template:
        out.append({"role": "system", "content": "Tools:\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)})
    for m in msgs:
        m = dict(m)
        if m.get("role") == "assistant":
            if "reasoning_content" in m and "reasoning_content" not in template:
                m["content"] = f"<think>{m.pop('reasoning_content')}</think>" + (m.get("content") or "")
            if "tool_calls" in m and "tool_calls" not in template:
                calls = [json.dumps(c["function"], ensure_ascii=False) for c in m.pop("tool_calls")]
                m["content"] = "\n".join([m.get("content") or "", *calls]).strip()
        out.append(m)
    return out


def _call(body: str, need_arguments: bool = False) -> dict | None:
    """A tool call of OpenAI's shape from one JSON object with a string ``name`` (and, where
    ``need_arguments``, an ``arguments`` or ``parameters`` key), else None."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    if need_arguments and "arguments" not in obj and "parameters" not in obj:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return {"type": "function", "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}}


def parse_reply(text: str) -> dict[str, Any]:
    """The assistant message of a reply's text: each ``<tool_call>`` block and each line that is a
    JSON call with its arguments (``fold_for_template``'s format) becomes a ``tool_calls`` entry (``arguments`` a JSON
    string, as OpenAI's API has it); a reply without one is plain content. A block or line that is
    not a JSON object with a string ``name`` stays in the content (the environment then says no call
    was found, as it does for GLM-5's template)."""
    calls, kept, pos = [], [], 0
    for m in CALL_RE.finditer(text):
        if (call := _call(m.group(1))) is not None:
            calls.append(call)
            kept.append(text[pos : m.start()])
            pos = m.end()
    kept.append(text[pos:])
    lines = []
    for line in "".join(kept).split("\n"):
        # a bare JSON line is a call only with its arguments (what the fold writes): an answer that
        # happens to be {"name": ...} stays an answer
        call = _call(line.strip(), need_arguments=True) if line.strip().startswith("{") else None
        if call is not None:
            calls.append(call)
        else:
            lines.append(line)
    if not calls:
        return {"role": "assistant", "content": text.strip()}
    for i, c in enumerate(calls):
        c["id"] = f"call_{i}"
    return {"role": "assistant", "content": "\n".join(lines).strip(), "tool_calls": calls}


def defuse(text: str, specials: list[str]) -> str:
    """Environment text with every special token's text broken by a zero-width space: a command
    that prints ``<|im_start|>`` must not become a role token when the observation is encoded."""
    for s in sorted(specials, key=len, reverse=True):
        if len(s) > 1 and s in text:
            text = text.replace(s, s[:1] + "\u200b" + s[1:])
    return text


def continuation(render, messages: list[dict], stop_texts: list[str]) -> tuple[str, str]:
    """(the stop text the template ends an assistant turn with, the text that follows it when
    ``messages`` (tool results, a next user turn) come next, up to the next generation prompt).
    ``render(msgs, generation_prompt)`` is the template."""
    before = render(_PROBE, False)
    after = render(_PROBE + messages, True)
    ends = [before.rfind(s) + len(s) for s in stop_texts if s and before.rfind(s) >= 0]
    if not ends:
        raise UserError("the chat template does not end an assistant turn with the model's stop token: "
                        "tool results cannot be appended to what the model sampled")
    cut = max(ends)
    if after[:cut] != before[:cut]:
        raise UserError("the chat template renders earlier turns differently once tool results follow: "
                        "they cannot be appended to what the model sampled")
    return next(s for s in stop_texts if s and before[:cut].endswith(s)), after[cut:]
