"""Trajectories as data: `session run --policy gold` (and nop) on a tiny Harbor task, exported with a
reward threshold, read by training.sft with the loss mask on the model's turns only."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker


def test_gold_session_trajectories_export_as_sft_data_with_the_right_mask(tmp_path):
    from tokenizers import decoders

    from swe_envs.docker_setup import ensure_docker
    from tests.training.chat_tok import chat_tokenizer
    from training.sft.data import DataConfig, ReadReport, tokenized_samples

    ensure_docker(BASE)
    tiny_task(tmp_path / "tasks")
    for policy in ("gold", "nop"):
        r = subprocess.run([sys.executable, "-m", "swe_envs", "session", "run", "--policy", policy, "--tasks",
                            str(tmp_path / "tasks"), "--output", str(tmp_path / policy)],
                           capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    sft = tmp_path / "sft.jsonl"
    r = subprocess.run([sys.executable, "-m", "training.rl", "export-sft", "--trajectories",
                        str(tmp_path / "gold" / "trajectories.jsonl"), "--trajectories",
                        str(tmp_path / "nop" / "trajectories.jsonl"), "--output", str(sft), "--min-reward", "1"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "kept 1 of 2" in r.stdout and "below_min_reward" in r.stdout, r.stdout + r.stderr
    (row,) = [json.loads(x) for x in sft.read_text().splitlines()]
    assert row["reward"] == 1.0 and row["messages"][-1]["role"] == "assistant"
    assert {t["function"]["name"] for t in row["tools"]} == {"bash", "str_replace_editor", "submit"}

    corpus = " ".join(json.dumps(m) for m in row["messages"])
    tok = chat_tokenizer(corpus)
    report = ReadReport()
    cfg = DataConfig(datasets=[{"path": str(sft), "category": "coding_agent", "min_reward": 1.0}],
                     mode="preserved", max_context=8192)
    (sample,) = tokenized_samples(cfg, tok, report)["coding_agent"]
    ids, mask = sample
    tok.decoder = decoders.ByteLevel()

    def text(keep: int) -> str:
        return tok.decode([t for t, m in zip(ids, mask, strict=True) if m == keep], skip_special_tokens=False)

    trained, context = text(1), text(0)
    assert trained.count("<tool_call>") == len([m for m in row["messages"] if m["role"] == "assistant"])
    assert "bash /solution/solve.sh" in trained and "<tool_call>submit" in trained
    assert "Write the number 42" in context and "Write the number 42" not in trained  # the instruction: context
    assert "<tool_response>" in context and "<tool_response>" not in trained  # observations: never trained
    assert report.rejects == {}
