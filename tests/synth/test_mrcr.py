import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from synth.mrcr import MrcrConfig, generate, grade, grade_files, passage_pool
from synth.mrcr.generate import ordinal

ROOT = Path(__file__).resolve().parents[2]
ORD = {ordinal(n): n for n in range(1, 20)}


@pytest.fixture(scope="module")
def pool(sample_corpus):
    return passage_pool([sample_corpus.books_jsonl], MrcrConfig().passages)


@pytest.fixture(scope="module")
def samples(pool):
    return generate(pool, 18, MrcrConfig(bins=[(3000, 6000), (6000, 12000)], seed=3))


def derive_answer(sample: dict) -> str:
    """Answer the final question from the prompt alone, as a perfect model would."""
    messages = sample["prompt"]
    q = messages[-1]["content"]
    rs = re.match(r"Prepend (\S+) to ", q).group(1)
    request = re.search(r'the request "(.*)"', q).group(1)
    replies = [
        messages[i + 1]["content"]
        for i, m in enumerate(messages[:-1])
        if m["role"] == "user" and m["content"] == request
    ]
    ks = [ORD[k] for k in re.findall(r"the (\d+(?:st|nd|rd|th))", q)]
    if "counting from the end" in q:
        picked = [replies[-ks[0]]]
    else:
        picked = [replies[k - 1] for k in ks]
    return rs + "\n\n".join(picked)


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


def test_grader_true_answer_scores_one_and_wrong_ones_less(samples):
    rng = np.random.default_rng(0)
    for s in samples:
        rs, answer = s["random_string_to_prepend"], s["answer"]
        assert grade(answer, answer, rs) == 1.0
        assert grade(answer[len(rs) :], answer, rs) == 0.0  # no prefix: zero
        others = [
            m["content"]
            for i, m in enumerate(s["prompt"][:-1])
            if m["role"] == "assistant" and i != s["desired_msg_index"]
        ]
        wrong = rs + others[int(rng.integers(len(others)))]
        assert 0.0 < grade(wrong, answer, rs) < 1.0


def test_generation_is_reproducible_and_bad_pools_are_errors(pool):
    cfg = MrcrConfig(needles=[2], bins=[(2000, 4000)], seed=11)
    assert generate(pool, 3, cfg) == generate(pool, 3, cfg)
    tiny = {"A book": ["one paragraph " * 20, "another paragraph " * 20]}
    with pytest.raises(InputError, match="more than 2 paragraphs"):
        generate(tiny, 1, cfg)


def run(*args, check=True):
    res = subprocess.run(
        [sys.executable, "-m", "synth.mrcr", *args], cwd=ROOT, capture_output=True, text=True
    )
    if check and res.returncode != 0:
        raise AssertionError(f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res


def test_cli_generate_and_grade(tmp_path, sample_corpus):
    out = tmp_path / "mrcr.jsonl"
    run(
        "generate",
        "--n",
        "6",
        "--needles",
        "2,4,8",
        "--out",
        str(out),
        "--documents",
        str(sample_corpus.books_jsonl),
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and [r["n_needles"] for r in rows] == [2, 4, 8, 2, 4, 8]
    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps({"response": derive_answer(r)}) + "\n" for r in rows))
    assert (
        float(run("grade", "--samples", str(out), "--responses", str(truth)).stdout.splitlines()[-1]) == 1.0
    )
    # every response answers with the wrong needle (the first reply that is not the desired one)
    wrong = tmp_path / "wrong.jsonl"
    with open(wrong, "w") as fh:
        for r in rows:
            other = next(
                m["content"]
                for i, m in enumerate(r["prompt"])
                if m["role"] == "assistant" and i not in r["desired_msg_indices"]
            )
            fh.write(json.dumps({"response": r["random_string_to_prepend"] + other}) + "\n")
    assert float(run("grade", "--samples", str(out), "--responses", str(wrong)).stdout.splitlines()[-1]) < 1.0
    # the graded file read through the library agrees with the CLI
    assert [score for _, score in grade_files(out, truth)] == [1.0] * 6


def test_cli_bad_input_is_one_line(tmp_path, sample_corpus):
    out = tmp_path / "s.jsonl"
    run(
        "generate",
        "--n",
        "2",
        "--needles",
        "2",
        "--out",
        str(out),
        "--documents",
        str(sample_corpus.books_jsonl),
    )
    short = tmp_path / "r.jsonl"
    short.write_text('{"response": "x"}\n')
    res = run("grade", "--samples", str(out), "--responses", str(short), check=False)
    assert res.returncode == 2 and "2 samples" in res.stderr and "1 responses" in res.stderr
    assert "Traceback" not in res.stderr
    res = run(
        "generate", "--n", "1", "--out", str(out), "--documents", str(tmp_path / "missing"), check=False
    )
    assert res.returncode == 2 and "no such documents" in res.stderr
    assert "--needles" in run("generate", "--help").stdout


@pytest.mark.parametrize(
    ("line", "message"),
    [("{oops", r"d\.jsonl:2: invalid JSON"), ('{"id": "b"}', r"d\.jsonl:2: expected an object with a string 'text'")],
)
def test_bad_documents_line_names_file_and_line(tmp_path, line, message):
    docs = tmp_path / "d.jsonl"
    docs.write_text('{"id": "a", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        passage_pool([docs], MrcrConfig().passages)
