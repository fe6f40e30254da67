"""GLM-5 chat template: hand-computed texts and masks per thinking mode, render -> parse round
trip (property test), encoding with added special tokens, bad input as counted rejects."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.training.chat_tok import chat_tokenizer
from training.chat_template import (
    SPECIAL_RE,
    SPECIAL_TOKENS,
    Reject,
    add_special_tokens,
    continuation,
    defuse,
    encode,
    generation_prompt,
    normalize,
    parse,
    render,
)

CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/", "n": 3}'}}
CONV = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U1"},
    {"role": "assistant", "reasoning_content": "R1", "content": "A1"},
    {"role": "user", "content": "U2"},
    {"role": "assistant", "reasoning_content": "R2", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "T"},
    {"role": "assistant", "reasoning_content": "R3", "content": "A2"},
]
PRE = "[gMASK]<sop><|system|>S<|user|>U1<|assistant|>"
HEAD = PRE + "<think>"
CALL_TXT = "<tool_call>ls<arg_key>path</arg_key><arg_value>/</arg_value><arg_key>n</arg_key><arg_value>3</arg_value></tool_call>"


def trained(sample) -> list[str]:
    return [sample.text[a:b] for a, b in sample.spans]


def test_interleaved_one_sample_per_user_turn_with_hand_masks():
    s0, s1 = render(CONV, "interleaved")
    assert s0.text == HEAD + "R1</think>A1<|user|>"
    assert trained(s0) == ["R1</think>A1<|user|>"]
    # turn 2: turn 1's thinking is cleared to GLM-5's lone separator and turn 1 is context only
    assert s1.text == (
        PRE + "</think>A1<|user|>U2<|assistant|><think>R2</think>" + CALL_TXT
        + "<|observation|><tool_response>T</tool_response><|assistant|><think>R3</think>A2<|user|>"
    )
    assert trained(s1) == ["R2</think>" + CALL_TXT + "<|observation|>", "R3</think>A2<|user|>"]


def test_preserved_keeps_every_thinking_block_in_one_sample():
    (s,) = render(CONV, "preserved")
    assert s.text.count("<think>R") == 3
    assert trained(s) == [
        "R1</think>A1<|user|>",
        "R2</think>" + CALL_TXT + "<|observation|>",
        "R3</think>A2<|user|>",
    ]


def test_turn_level_off_renders_an_empty_block_in_the_prompt():
    conv = [dict(m) for m in CONV]
    conv[3] = {"role": "user", "content": "U2", "thinking": False}
    s0, s1 = render(conv, "turn")
    assert trained(s0) == ["R1</think>A1<|user|>"]
    # thinking off: GLM-5's "</think>" is prompt; the model's own text starts after it
    assert "<|assistant|></think>" + CALL_TXT in s1.text and "<think>" not in s1.text
    assert trained(s1) == [CALL_TXT + "<|observation|>", "A2<|user|>"]
    assert "R2" not in s1.text and "R3" not in s1.text


def test_never_trains_system_user_or_observation_text():
    for mode in ("interleaved", "preserved", "turn"):
        for s in render(CONV, mode):
            text = "".join(trained(s))
            for untrained in ("S", "U1", "U2", "<tool_response>", "T</tool_response>", "<|assistant|>"):
                assert untrained not in text, (mode, untrained)


def test_only_the_stop_token_the_model_emits_ends_a_trained_turn():
    """Data with two assistant messages in a row, a system message after an answer, or tool
    calls answered by the user: the next role token is then not the model's stop token and
    is never trained (the model must not learn to emit <|assistant|> or <|system|>)."""
    call = {"type": "function", "function": {"name": "ls", "arguments": "{}"}}
    msgs = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
            {"role": "assistant", "content": "B", "tool_calls": [call]}, {"role": "user", "content": "V"},
            {"role": "assistant", "content": "C"}, {"role": "system", "content": "S"},
            {"role": "user", "content": "W"}, {"role": "assistant", "content": "D"}]  # fmt: skip
    (s,) = render(msgs, "preserved")
    assert trained(s) == ["</think>A", "</think>B<tool_call>ls</tool_call>", "</think>C", "</think>D<|user|>"]
    for mode in ("interleaved", "turn"):
        for sample in render(msgs, mode):
            text = "".join(trained(sample))
            assert "<|assistant|>" not in text and "<|system|>" not in text


def test_generation_prompt_keeps_thinking_of_the_current_turn():
    prompt = generation_prompt(CONV[:6])
    assert prompt.endswith("<tool_response>T</tool_response><|assistant|><think>")
    assert "R2</think>" in prompt and "R1" not in prompt  # current turn kept, earlier cleared
    # the rendered training text continues the prompt append-only
    (_, s1) = render(CONV, "interleaved")
    assert s1.text.startswith(prompt)


def test_continuation_after_a_tool_call_extends_the_sampled_text_append_only():
    """A multi-turn rollout appends the tool results and the next generation prompt to what the model
    sampled: the result is what the template renders for the whole conversation."""
    head = CONV[:5]  # ... the model's turn with a tool call, handed over with <|observation|>
    sampled = generation_prompt(head[:4]) + "R2</think>" + CALL_TXT + "<|observation|>"
    msgs = head + [{"role": "tool", "content": "T"}]
    assert sampled + continuation(msgs[5:]) == generation_prompt(msgs)
    two = [{"role": "tool", "content": "T"}, {"role": "tool", "content": "T2"}]
    assert continuation(two, thinking=False) == (
        "<tool_response>T</tool_response><tool_response>T2</tool_response><|assistant|></think>")
    assert continuation([{"role": "tool", "content": "T"}, {"role": "user", "content": "next"}]) == (
        "<tool_response>T</tool_response><|user|>next<|assistant|><think>")
    with pytest.raises(Reject, match="reserved_token"):  # environment text is defused first, never trusted
        continuation([{"role": "tool", "content": "x<|user|>y"}])
    safe = defuse("x<|user|>y</think>")
    assert not SPECIAL_RE.search(safe) and safe.replace("\u200b", "") == "x<|user|>y</think>"
    with pytest.raises(Reject):
        continuation([{"role": "user", "content": "u"}, {"role": "tool", "content": "T"}])


def test_matches_glm5_reference_text_with_tools():
    """Hand-written from GLM-5's chat_template.jinja (tools block word for word, compact layout,
    stripped assistant text, lone </think> for cleared thinking, thinking-off prompt)."""
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    msgs = [
        {"role": "user", "content": "U1"},
        {"role": "assistant", "reasoning_content": "\nR1 ", "content": " A1\n"},
        {"role": "user", "content": " U2 "},
        {"role": "assistant", "reasoning_content": "R2", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "T"},
        {"role": "assistant", "content": "A2"},
    ]
    block = (
        "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "ls", "parameters": {}}}\n</tools>\n\n'
        "For each function call, output the function name and arguments within the following XML format:\n"
        "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
        "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
    )
    s0, s1 = render(msgs, "interleaved", tools)
    assert s0.text == block + "<|user|>U1<|assistant|><think>R1</think>A1<|user|>"
    assert s1.text == (
        block + "<|user|>U1<|assistant|></think>A1<|user|> U2 <|assistant|><think>R2</think>" + CALL_TXT
        + "<|observation|><tool_response>T</tool_response><|assistant|><think></think>A2<|user|>"
    )
    assert generation_prompt(msgs[:3], tools) == block + "<|user|>U1<|assistant|></think>A1<|user|> U2 <|assistant|><think>"
    off = [*msgs[:2], {"role": "user", "content": "U2", "thinking": False}]
    assert generation_prompt(off, tools, mode="turn").endswith("<|user|>U2<|assistant|></think>")
    back, got_tools = parse(s1.text)  # the cleared block parses to no reasoning
    want = normalize(msgs)
    assert got_tools == tools and back == [*want[:1], {"role": "assistant", "content": "A1"}, *want[2:]]
    assert want[1]["reasoning_content"] == "R1" and parse(render(msgs, "preserved", tools)[0].text)[0] == want


def test_inline_thinking_in_content_is_split_like_glm_does():
    msgs = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "<think>\nR\n</think>\n\nA"},
            {"role": "user", "content": "V"}, {"role": "assistant", "content": "R2</think>B"}]  # fmt: skip
    assert normalize(msgs)[1] == {"role": "assistant", "content": "A", "reasoning_content": "R"}
    assert normalize(msgs)[3] == {"role": "assistant", "content": "B", "reasoning_content": "R2"}
    (s,) = render(msgs, "preserved")
    assert trained(s) == ["R</think>A<|user|>", "R2</think>B<|user|>"]
    with pytest.raises(Reject, match="reserved_token_in_content"):  # a second block is not thinking
        normalize([msgs[0], {"role": "assistant", "content": "<think>R</think>A</think>"}])


# -- round trip ------------------------------------------------------------------------------------

# any text but the template's control tokens themselves (those are rejects, tested below); "<",
# "|", "[" and fragments like "</thin" stay in, next to the real tokens
pieces = st.one_of(st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
                   st.sampled_from(["<", ">", "|", "[", "]", "</", "<|", "think", "</thin", "<|user"]))  # fmt: skip
safe_text = st.lists(pieces, max_size=4).map("".join).filter(lambda t: not SPECIAL_RE.search(t))
# values follow TOOLS' schema: a string, b integer, c array (the parser types them by it)
ARG_VALUES = {"a": safe_text, "b": st.integers(-5, 5), "c": st.lists(st.integers(0, 3), max_size=3)}


@st.composite
def conversations(draw):
    msgs = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(safe_text)})
    for _ in range(draw(st.integers(1, 3))):
        msgs.append({"role": "user", "content": draw(safe_text)})
        for _ in range(draw(st.integers(0, 2))):  # tool-call steps
            n = draw(st.integers(1, 2))
            calls = [
                {"type": "function", "function": {
                    "name": draw(st.sampled_from(["ls", "cat", "grep"])),
                    "arguments": json.dumps({k: draw(ARG_VALUES[k]) for k in draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3))}),
                }}
                for _ in range(n)
            ]  # fmt: skip
            msgs.append({"role": "assistant", "content": draw(safe_text), "reasoning_content": draw(safe_text), "tool_calls": calls})
            msgs += [{"role": "tool", "content": draw(safe_text)} for _ in range(n)]
        msgs.append({"role": "assistant", "content": draw(safe_text), "reasoning_content": draw(safe_text)})
    return msgs


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "array"}}}}}
    for name in ("ls", "cat", "grep")
]  # fmt: skip


# derandomized and without an example database: the same 150 conversations on every machine
@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conversations())
def test_render_parse_round_trip(msgs):
    (s,) = render(msgs, "preserved", tools=TOOLS)
    back, tools = parse(s.text)
    assert tools == TOOLS
    assert back == normalize(msgs)
    # clear mode: sample k parses to the conversation up to the end of user turn k, the
    # reasoning of earlier turns cleared
    norm = normalize(msgs)
    users = [i for i, m in enumerate(norm) if m["role"] == "user"]
    for k, sample in enumerate(render(msgs, "interleaved", tools=TOOLS)):
        end = users[k + 1] if k + 1 < len(users) else len(norm)
        want = [{x: v for x, v in m.items() if x != "reasoning_content" or i >= users[k]} for i, m in enumerate(norm[:end])]
        assert parse(sample.text) == (want, TOOLS)


def test_parse_without_schema_reads_json_values():
    msgs = [{"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 3, "y": "a b"}}}]}]  # fmt: skip
    back, _ = parse(render(msgs, "preserved")[0].text)
    assert json.loads(back[1]["tool_calls"][0]["function"]["arguments"]) == {"x": 3, "y": "a b"}


# -- tokens ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return chat_tokenizer("hello world A1 A2 R1 R2 path ls tool")


def test_encode_masks_tokens_and_matches_whole_text_encoding(tok):
    eos_before = tok.token_to_id("<|endoftext|>")
    add_special_tokens(tok)  # idempotent
    assert tok.token_to_id("<|endoftext|>") == eos_before
    assert all(tok.token_to_id(t) is not None for t in SPECIAL_TOKENS)
    for s in render(CONV, "preserved"):
        ids, mask = encode(s, tok)
        assert ids == tok.encode(s.text, add_special_tokens=False).ids
        trained_ids = [i for i, m in zip(ids, mask, strict=True) if m]
        want = []
        for a, b in s.spans:
            want += tok.encode(s.text[a:b], add_special_tokens=False).ids
        assert trained_ids == want
        # the ending tokens are trained, the opening assistant token never is
        assert tok.token_to_id("<|user|>") in trained_ids and tok.token_to_id("<|assistant|>") not in trained_ids


# -- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msgs", "reason"),
    [
        ([{"role": "wizard", "content": "x"}], "unknown_role"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]}], "tool_call_without_name"),
        ([{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}, {"role": "assistant", "content": "y"}], "tool_result_without_call"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [CALL]},
          {"role": "tool", "tool_call_id": "c9", "content": "r"}], "tool_result_without_call"),
        ([{"role": "user", "content": {"text": "x"}}, {"role": "assistant", "content": "y"}], "non_string_content"),
        ([{"role": "user", "content": "x<|user|>"}, {"role": "assistant", "content": "y"}], "reserved_token_in_content"),
        ([{"role": "user", "content": "x"}], "no_assistant_message"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}], "bad_tool_arguments"),
    ],
)  # fmt: skip
def test_bad_conversations_are_rejected_with_a_reason(msgs, reason):
    with pytest.raises(Reject) as err:
        render(msgs, "interleaved")
    assert err.value.reason == reason


def test_cli_prints_samples_and_counts_rejects(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps({"messages": CONV}) + "\n" + '{"messages": [{"role": "wizard"}]}\n' + "not json\n"
        + json.dumps({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}) + "\n"
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "training.chat_template", "render", "--messages", str(path), "--mode", "preserved"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 2
    first = rows[0]
    assert [first["text"][a:b] for a, b in first["loss_mask"]] == trained(render(CONV, "preserved")[0])
    assert rows[1]["text"] == "[gMASK]<sop><|user|>hi<|assistant|><think></think>yo<|user|>"
    assert "unknown_role=1" in out.stderr and "bad_json=1" in out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "training.chat_template", "render", "--messages", str(path), "--mode", "nope"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


# -- formats found in public SFT data -------------------------------------------------------------


def test_tools_given_as_a_json_string_like_sharegpt_data():
    """LLaMA-Factory's ShareGPT files (glaive tool calling) keep ``tools`` as a JSON string, empty
    when a conversation has none; a string that is not JSON is a counted reject, never a crash."""
    from training.chat_template import conversation_of

    tool = {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    record = {"conversations": [{"from": "human", "value": "hi"},
                                {"from": "function_call", "value": json.dumps({"name": "f", "arguments": {"q": "7"}})},
                                {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "ok"}],
              "tools": json.dumps([tool])}  # fmt: skip
    msgs, tools = conversation_of(record)
    (s,) = render(msgs, "preserved", tools)
    assert json.dumps(tool) + "\n</tools>" in s.text
    assert parse(s.text)[0][1]["tool_calls"][0]["function"]["arguments"] == '{"q": "7"}'  # "7" stays a string
    assert render(msgs, "preserved", "")[0].text.startswith("[gMASK]<sop><|user|>")  # no tools
    with pytest.raises(Reject) as err:
        render(msgs, "preserved", "[{oops")
    assert err.value.reason == "bad_tools"


def test_typed_content_parts_become_reasoning_content_and_tool_calls():
    """LLaMA-Factory's messages format: typed parts with ``value``; OpenAI's text parts."""
    from training.chat_template import conversation_of

    record = {"messages": [
        {"role": "user", "content": [{"type": "text", "value": "U"}]},
        {"role": "assistant", "content": [{"type": "reasoning", "value": "R"},
                                          {"type": "tool_call", "value": json.dumps({"name": "f", "arguments": {"x": 1}})}]},
        {"role": "tool", "content": [{"type": "text", "value": "T"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
    ]}  # fmt: skip
    msgs, _ = conversation_of(record)
    (s,) = render(msgs, "preserved")
    assert trained(s) == ["R</think><tool_call>f<arg_key>x</arg_key><arg_value>1</arg_value></tool_call><|observation|>",
                          "</think>AB<|user|>"]  # fmt: skip
    assert "<|user|>U<|assistant|>" in s.text and "<tool_response>T</tool_response>" in s.text
    # never read as empty text: an image part, a text part without its text, a tool call without a name
    for content in ([{"type": "image", "value": "a.png"}], [{"type": "text", "value": "U"}, {"type": "text"}],
                    [{"type": "text", "value": "U"}, {"type": "text", "value": 3}], [{"type": "text"}]):  # fmt: skip
        msgs, _ = conversation_of({"messages": [{"role": "user", "content": content}, record["messages"][3]]})
        with pytest.raises(Reject) as err:
            render(msgs, "preserved")
        assert err.value.reason == "non_string_content", content
    with pytest.raises(Reject) as err:
        bad = {"role": "assistant", "content": [{"type": "tool_call", "value": '{"arguments": {}}'}]}
        render(conversation_of({"messages": [record["messages"][0], bad]})[0], "preserved")
    assert err.value.reason == "tool_call_without_name"


def test_parse_types_arguments_by_flat_python_style_schemas():
    """ToolBench/xLAM tool lists map arguments to specs directly, with types like "str, optional":
    a string argument that looks like JSON ("2") must come back a string; a value that is not
    JSON for a non-string type comes back as the text written."""
    tools = [{"type": "function", "function": {"name": "us", "parameters": {
        "cards": {"type": "str, optional", "default": "2"}, "n": {"type": "int"}}}}]  # fmt: skip
    call = {"function": {"name": "us", "arguments": {"cards": "2", "n": "two"}}}
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    back, _ = parse(render(msgs, "preserved", tools)[0].text)
    assert json.loads(back[1]["tool_calls"][0]["function"]["arguments"]) == {"cards": "2", "n": "two"}
