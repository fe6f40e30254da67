"""benchmarks/rl_agentic_real.py's inputs: the named real SWE-bench rows and Terminal-Bench seeds, the
seeds converted to Harbor tasks the session runner opens; an unknown id is an error, never a smaller set.
(The gold/nop sessions and the RL runs are the benchmark's, `python benchmarks/rl_agentic_real.py`.)"""

from __future__ import annotations

import json

import pytest

from benchmarks import rl_agentic_real as bench

SWE_REAL, SEEDS = bench.SHARED / "swe-real", bench.SHARED / "terminal-seeds"
pytestmark = pytest.mark.skipif(not (SWE_REAL.is_dir() and SEEDS.is_dir()), reason="../shared real sets absent")


def test_inputs_pick_the_named_rows_and_convert_the_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "WORK", tmp_path)
    paths = bench.inputs(SWE_REAL, SEEDS, ["pallets__flask-5014"], ["evoeval/0"])
    rows = [json.loads(x) for x in paths["instances"].read_text().splitlines()]
    assert [r["instance_id"] for r in rows] == ["pallets__flask-5014"] and rows[0]["patch"]
    assert (paths["tasks"] / "evoeval__0" / "task.toml").is_file()
    assert (paths["tasks"] / "evoeval__0" / "solution").is_dir()


def test_an_unknown_instance_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "WORK", tmp_path)
    with pytest.raises(SystemExit, match="no-such-instance"):
        bench.inputs(SWE_REAL, SEEDS, ["pallets__flask-5014", "no-such-instance"], ["evoeval/0"])


def test_sft_rows_are_only_gold_episodes_that_scored_1(tmp_path, monkeypatch):
    """The SFT rows of rl_agentic_real_sft and rl_agentic_long: the gold episodes with reward 1, cut at
    the last model turn (the verifier's closing observation is not trained); for the GLM-5 template
    every user turn with thinking off, as the RL prompts render it; none scoring 1 is an error, never
    an empty SFT."""
    from benchmarks.rl_agentic import thinking_off

    monkeypatch.setattr(bench, "WORK", tmp_path)
    call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    row = {"id": "t1", "messages": [{"role": "user", "content": "fix it"},
                                    {"role": "assistant", "content": "", "tool_calls": [call]},
                                    {"role": "tool", "tool_call_id": "c1", "content": "reward 1"}], "turns": 1}
    for kind, reward in (("swe", 1.0), ("terminal", 0.0)):
        (tmp_path / f"gold_{kind}").mkdir()
        (tmp_path / f"gold_{kind}" / "trajectories.jsonl").write_text(json.dumps(dict(row, reward=reward)) + "\n")
    kept = [json.loads(x) for x in bench.gold_sft_rows().read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["messages"][-1]["role"] == "assistant" and kept[0]["tools"]
    glm = [json.loads(x) for x in thinking_off(bench.gold_sft_rows("glm.jsonl")).read_text().splitlines()]
    assert [m.get("thinking") for m in glm[0]["messages"] if m["role"] == "user"] == [False]
    assert "thinking" not in kept[0]["messages"][0]  # the other file is untouched
    (tmp_path / "gold_swe" / "trajectories.jsonl").write_text(json.dumps(dict(row, reward=0.0)) + "\n")
    with pytest.raises(SystemExit, match="no gold episode scored 1"):
        bench.gold_sft_rows()
