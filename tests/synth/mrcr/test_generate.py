"""synth.mrcr.generate: OpenAI-MRCR-shaped samples whose answers follow from the prompt."""

import pytest

from core.errors import InputError
from synth.mrcr import MrcrConfig, generate
from tests.synth.mrcr.answers import derive_answer


def test_fields_like_openai_mrcr(samples):
    for s in samples:
        msgs = s["prompt"]
        assert [m["role"] for m in msgs[:-1]] == ["user", "assistant"] * ((len(msgs) - 1) // 2)
        assert msgs[-1]["role"] == "user" and s["total_messages"] == len(msgs)
        assert s["n_chars"] == sum(len(m["content"]) for m in msgs)
        assert s["answer"].startswith(s["random_string_to_prepend"])
        assert len(s["random_string_to_prepend"]) == 10
        # exactly n_needles turns carry the needle request; the desired reply answers one
        needle_turns = [
            i for i, m in enumerate(msgs) if m["role"] == "user" and m["content"] == s["needle_request"]
        ]
        assert len(needle_turns) == s["n_needles"]
        assert msgs[s["desired_msg_index"]]["role"] == "assistant"
        assert s["desired_msg_index"] - 1 in needle_turns
        assert s["answer"][len(s["random_string_to_prepend"]) :].startswith(
            msgs[s["desired_msg_index"]]["content"]
        )
    assert {s["n_needles"] for s in samples} == {2, 4, 8}
    assert {s["variant"] for s in samples} == {"kth_from_start", "kth_from_end", "multi_ask"}
    assert {s["bin"] for s in samples} == {"3000-6000", "6000-12000"}
    for s in samples:  # lengths land in their bins (in characters by default)
        lo, hi = (int(x) for x in s["bin"].split("-"))
        assert lo <= s["length"] < hi


def test_answers_are_derivable_from_the_prompt(samples):
    for s in samples:
        assert derive_answer(s) == s["answer"], s["variant"]


def test_distractors_are_real_text_and_include_hard_negatives(samples, pool):
    paragraphs = {p for ps in pool.values() for p in ps}
    hard = 0
    for s in samples:
        title = next(t for t in pool if t in s["needle_request"])
        for m in s["prompt"][:-1]:
            if m["role"] == "assistant":
                assert m["content"] in paragraphs
            elif m["content"] != s["needle_request"] and title in m["content"]:
                hard += 1  # same document, asked in other words
    assert hard > 0


def test_generation_is_reproducible_and_bad_pools_are_errors(pool):
    cfg = MrcrConfig(needles=[2], bins=[(2000, 4000)], seed=11)
    assert generate(pool, 3, cfg) == generate(pool, 3, cfg)
    tiny = {"A book": ["one paragraph " * 20, "another paragraph " * 20]}
    with pytest.raises(InputError, match="more than 2 paragraphs"):
        generate(tiny, 1, cfg)
