"""The trajectory contract: the append-only check of re-rendered contexts (token-in/token-out)."""

from __future__ import annotations

import pytest

from training.rl.trajectory import NotAppendOnly, extend_context


def test_extend_context_refuses_rewrites():
    assert extend_context([1, 2, 3], [1, 2, 3, 4, 5]) == [4, 5]
    with pytest.raises(NotAppendOnly, match="token 1"):
        extend_context([1, 2, 3], [1, 9, 3, 4])
    with pytest.raises(NotAppendOnly):
        extend_context([1, 2, 3], [1, 2])


def test_chat_agent_loop_is_append_only_until_thinking_is_cleared():
    """Token-in/token-out with the real GLM-5 template and a BPE tokenizer: inside one user turn
    each re-rendered prompt extends the sampled tokens (an empty thinking block too); a new user
    turn that clears earlier thinking is refused, and preserved mode is not."""
    from tests.training.chat_tok import chat_tokenizer
    from training.chat_template import generation_prompt

    tok = chat_tokenizer("list the files, reasoning about ls and paths")

    def ids(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    call = {"type": "function", "function": {"name": "ls", "arguments": '{"path": "/"}'}}
    msgs = [{"role": "user", "content": "list the files"}]
    for mode in ("interleaved", "preserved"):
        context = ids(generation_prompt(msgs, mode=mode))
        # the model's turn as sampled: reasoning, the closing tag, a tool call, the ending role token
        context += ids("reason about ls</think><tool_call>ls<arg_key>path</arg_key><arg_value>/</arg_value></tool_call><|observation|>")
        turn = [*msgs, {"role": "assistant", "reasoning_content": "reason about ls", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "a b"}]  # fmt: skip
        context += extend_context(context, ids(generation_prompt(turn, mode=mode)))
        context += ids("</think>files: a b<|user|>")  # an answer with an empty thinking block
        turn += [{"role": "assistant", "content": "files: a b"}, {"role": "user", "content": "thanks"}]
        rerendered = ids(generation_prompt(turn, mode=mode))
        if mode == "interleaved":  # the new user turn clears the earlier thinking: not what was sampled
            with pytest.raises(NotAppendOnly):
                extend_context(context, rerendered)
        else:
            assert extend_context(context, rerendered) == ids("thanks<|assistant|><think>")
