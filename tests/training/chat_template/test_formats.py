"""Input formats: JSONL or one JSON array per file; OpenAI messages, ShareGPT and Alpaca records
(LLaMA-Factory's conventions), each converted or rejected with a reason."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.chat_template import Reject, conversation_of, render
from training.chat_template.formats import conversation_lines

SHAREGPT = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
MESSAGES = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]


def test_a_json_array_file_gives_its_records(tmp_path):
    """ShareGPT and LLaMA-Factory ship datasets as one (pretty-printed) JSON array."""
    path = tmp_path / "d.json"
    path.write_text(json.dumps([SHAREGPT, {"messages": MESSAGES}, 7], indent=2))
    assert list(conversation_lines(path)) == [(1, SHAREGPT), (2, {"messages": MESSAGES}), (3, 7)]


def test_jsonl_whose_lines_are_message_lists_stays_jsonl(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(MESSAGES) + "\n\n" + "{oops\n" + json.dumps(SHAREGPT) + "\n")
    got = list(conversation_lines(path))
    assert [(n, r) for n, r in got if not isinstance(r, Reject)] == [(1, MESSAGES), (4, SHAREGPT)]
    assert got[1][0] == 3 and got[1][1].reason == "bad_json"
    broken = tmp_path / "broken.json"  # an array cut short: line by line, every bad line counted
    broken.write_text("[\n" + json.dumps(SHAREGPT) + ",\n")
    assert [r.reason for _, r in conversation_lines(broken)] == ["bad_json", "bad_json"]


def test_bytes_that_are_not_utf8_are_a_reject_never_replaced_text(tmp_path):
    path = tmp_path / "d.jsonl"
    line = json.dumps({"messages": [{"role": "user", "content": "caf@"}, MESSAGES[1]]}).encode()
    path.write_bytes(line.replace(b"@", b"\xe9") + b"\nnull\n" + line + b"\n")
    (n1, r1), (n2, r2), (n3, r3) = conversation_lines(path)
    assert isinstance(r1, Reject) and r1.reason == "undecodable_text"
    assert r2 is None  # valid JSON that is no conversation: conversation_of rejects it by format
    with pytest.raises(Reject, match="unknown_record_format"):
        conversation_of(r2)
    assert r3["messages"][0]["content"] == "caf@"
    array = tmp_path / "d.json"  # a JSON array with a bad byte is read line by line
    array.write_bytes(b"[\n" + line.replace(b"@", b"\xe9") + b",\n" + line + b"\n]\n")
    assert [getattr(r, "reason", "ok") for _, r in conversation_lines(array)] == ["bad_json", "undecodable_text", "ok", "bad_json"]


def test_alpaca_records_become_messages():
    rec = {"instruction": "Translate", "input": "chat", "output": "cat", "system": "S",
           "history": [["hi", "hello"]]}  # fmt: skip
    msgs, tools = conversation_of(rec)
    assert tools is None and msgs == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "Translate\nchat"}, {"role": "assistant", "content": "cat"},
    ]  # fmt: skip
    s0, s1 = render(msgs, "interleaved")
    assert s1.text.endswith("<|user|>Translate\nchat<|assistant|><think></think>cat<|user|>")
    assert conversation_of({"instruction": "I", "input": "", "output": "o"})[0][0] == {"role": "user", "content": "I"}


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"instruction": "I", "input": 5, "output": "o"}, "non_string_content"),
        ({"instruction": None, "output": "o"}, "non_string_content"),
        ({"instruction": "I", "output": "o", "history": [["only one"]]}, "bad_message"),
        ({"prompt": "p", "completion": "c"}, "unknown_record_format"),
    ],
)
def test_bad_alpaca_and_unknown_records_are_rejects(record, reason):
    with pytest.raises(Reject) as err:
        msgs, tools = conversation_of(record)
        render(msgs, "interleaved", tools)
    assert err.value.reason == reason


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                    max_leaves=12)  # fmt: skip
KEYS = ["role", "content", "from", "value", "type", "text", "name", "arguments", "tool_calls", "reasoning_content"]
FIELD = st.sampled_from(["user", "assistant", "tool", "human", "gpt", "function_call", "text", "reasoning",
                         "tool_call", '{"name": "f", "arguments": {}}']) | JSON  # fmt: skip
PART = st.dictionaries(st.sampled_from(KEYS), FIELD, max_size=4)
RECORD = st.one_of(
    JSON,
    st.fixed_dictionaries({"messages": st.lists(st.dictionaries(st.sampled_from(KEYS), FIELD | st.lists(PART, max_size=3),
                                                                max_size=4), max_size=4)}, optional={"tools": JSON}),
    st.fixed_dictionaries({"conversations": st.lists(PART, max_size=4)}, optional={"tools": JSON}),
    st.fixed_dictionaries({"instruction": FIELD, "output": FIELD}, optional={"input": FIELD, "history": JSON}),
)  # fmt: skip


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(RECORD)
def test_any_record_converts_and_renders_or_is_a_reject(record):
    """Untrusted JSON in every format's fields: a sample or a Reject with a reason, never
    another exception (the CLI and the SFT reader count Rejects and go on)."""
    try:
        msgs, tools = conversation_of(record)
        render(msgs, "interleaved", tools)
    except Reject as err:
        assert err.reason
