"""The GLM-5 template in Jinja (training.chat_template.jinja) renders, through transformers'
``apply_chat_template``, exactly what ``render`` trains and ``generation_prompt`` prompts with, in
every thinking mode, on generated conversations (tools, tool calls, empty texts, odd characters)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.training.chat_template.test_template import CONV, TOOLS, conversations
from tests.training.chat_tok import chat_tokenizer
from training.chat_template import MODES, generation_prompt, normalize, render
from training.chat_template.jinja import glm5_jinja


@pytest.fixture(scope="module")
def hf_glm_tok():
    from transformers import PreTrainedTokenizerFast

    t = PreTrainedTokenizerFast(tokenizer_object=chat_tokenizer("hello world A1 A2 R1 R2 path ls tool"))
    t.chat_template = glm5_jinja("interleaved")
    return t


def as_hf(msgs: list[dict]) -> list[dict]:
    """The transformers convention: tool-call arguments as objects, not JSON strings."""
    out = []
    for m in msgs:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]  # fmt: skip
        out.append(m)
    return out


def check(tok, msgs: list[dict], tools, mode: str) -> None:
    """Every assistant message's prompt is ``generation_prompt``'s; the whole conversation is the
    last trained sample without its implied ending token."""
    hf = as_hf(msgs)
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            got = tok.apply_chat_template(hf[:i], tools=tools, tokenize=False, add_generation_prompt=True,
                                          thinking_mode=mode)  # fmt: skip
            assert got == generation_prompt(msgs[:i], tools, mode), (mode, i)
    last = render(msgs, mode, tools)[-1].text
    ending = "<|observation|>" if normalize(msgs)[-1].get("tool_calls") else "<|user|>"
    assert tok.apply_chat_template(hf, tools=tools, tokenize=False, thinking_mode=mode) + ending == last


@pytest.mark.parametrize("mode", MODES)
def test_hand_conversation_in_every_mode(hf_glm_tok, mode):
    check(hf_glm_tok, CONV, TOOLS, mode)
    check(hf_glm_tok, CONV, None, mode)


def test_default_mode_is_baked_in_and_turn_mode_honours_thinking_off(hf_glm_tok):
    from transformers import PreTrainedTokenizerFast

    msgs = [{"role": "user", "content": "U1"}, {"role": "assistant", "reasoning_content": "R1", "content": "A1"},
            {"role": "user", "content": "U2", "thinking": False}]  # fmt: skip
    t = PreTrainedTokenizerFast(tokenizer_object=hf_glm_tok.backend_tokenizer)
    t.chat_template = glm5_jinja("turn")
    assert t.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True).endswith(
        "<|user|>U2<|assistant|></think>"
    )
    t.chat_template = glm5_jinja("preserved")
    assert "<think>R1</think>A1" in t.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    with pytest.raises(ValueError):
        glm5_jinja("nope")


def test_string_arguments_are_refused_not_dropped(hf_glm_tok):
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "ls", "arguments": '{"a": 1}'}}]}]  # fmt: skip
    with pytest.raises(Exception, match="arguments as an object"):
        hf_glm_tok.apply_chat_template(msgs, tokenize=False)


@st.composite
def with_thinking_flags(draw):
    """``conversations()`` with some user turns' thinking turned off (turn mode reads the flag)."""
    return [
        {**m, "thinking": False} if m["role"] == "user" and draw(st.booleans()) else m
        for m in draw(conversations())
    ]


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(with_thinking_flags())
def test_generated_conversations_in_every_mode(hf_glm_tok, msgs):
    for mode in MODES:
        check(hf_glm_tok, msgs, TOOLS, mode)
