"""benchmarks/rl_agentic.py's policy data: the gold episodes of the samples' SWE instance and Harbor task,
replayed in real Docker sessions, become SFT rows whose rendering starts with exactly the prompt the RL
orchestrator sends (thinking off) and trains the tool calls that follow it. (The SFT and RL runs
themselves are the benchmark's, `python benchmarks/rl_agentic.py`.)"""

from __future__ import annotations

import json

import pytest

from benchmarks import rl_agentic as bench

pytestmark = pytest.mark.docker


def test_gold_rows_train_what_the_rl_prompt_asks_for(tmp_path, monkeypatch):
    from tokenizers import Tokenizer

    from core.local_lm import obtain_smollm2
    from samples.agentic import build_agentic
    from training import chat_template as ct
    from training.policy.codec import Codec

    monkeypatch.setattr(bench, "WORK", tmp_path)
    rows = [json.loads(x) for x in bench.gold_rows(build_agentic(tmp_path / "agentic")).read_text().splitlines()]
    assert len(rows) == 2 and all(r["reward"] == 1.0 for r in rows)
    codec = Codec(Tokenizer.from_file(str(obtain_smollm2() / "tokenizer.json")))
    for r in rows:
        pieces = ct.render(r["messages"], "turn", r["tools"])[0].pieces
        text = "".join(t for t, _ in pieces)
        prompt = codec.decode(codec.chat_prompt(r["messages"][:1], thinking=False, tools=r["tools"]), skip_special=False)
        assert text.startswith(prompt)
        trained = [t for t, on in pieces if on]
        assert trained[0].startswith("<tool_call>")
        assert trained.count(ct.OBSERVATION) >= 2  # several turns, each handing over to the tools


def test_spread_is_median_p90_and_max_of_the_numbers_present():
    xs = [float(i) for i in range(1, 11)] + [None, "x"]  # an episode without the figure counts for nothing
    assert bench._spread(xs) == {"n": 10, "p50": 6.0, "p90": 10.0, "max": 10.0}
    assert bench._spread([None]) == {}
