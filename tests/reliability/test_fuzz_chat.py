"""Fuzzing the GLM-5 chat template with hostile conversations (SFT data and RL rollouts are
untrusted): arbitrary JSON in place of messages, roles, contents, tool calls and their
arguments, and real-looking conversations with fields replaced. A conversation renders, or is
refused with ``Reject`` (a counted reason) — never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import JSON, TEXT, mutated

chat = pytest.importorskip("training.chat_template")
from training.chat_template.template import Reject  # noqa: E402

CONVERSATIONS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "reasoning_content": "add", "content": "4"}],
    [{"role": "user", "content": "weather in Paris?"},
     {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
         "name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}}]},
     {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}],
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
ROLE = st.sampled_from(["system", "user", "assistant", "tool", "observation", "", "USER"]) | TEXT
MESSAGE = st.fixed_dictionaries({"role": ROLE}, optional={"content": TEXT | JSON, "reasoning_content": TEXT | JSON,
                                                          "tool_calls": JSON, "thinking": JSON})


@pytest.mark.area("chat messages")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=40)
@given(messages=st.lists(MESSAGE, max_size=6) | mutated(CONVERSATIONS).map(lambda v: v[0]) | JSON,
       tools=st.sampled_from([None, TOOLS]) | JSON, mode=st.sampled_from(["interleaved", "preserved", "turn"]))
def test_conversations_render_or_are_rejected_with_a_reason(messages, tools, mode):
    faults = 0
    for fn in (lambda: chat.render(messages, mode, tools), lambda: chat.generation_prompt(messages, tools, mode)):
        try:
            fn()
        except Reject as err:
            assert err.reason
            faults = 1
    LEDGER.add("chat messages", tried=1, faults=faults)
