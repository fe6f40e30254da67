"""The TRL side-by-side benchmark end to end on a tiny random Llama made by transformers itself
(standing in for SmolLM2-135M; the figures come from `python benchmarks/trl_side_by_side.py`):
both SFT sides train the same batches, both GRPO sides the same number of completions, each side in
a fresh interpreter, repeated, and one evaluator scores both final models."""

from __future__ import annotations

import json

import pytest

from benchmarks import _report
from benchmarks import trl_side_by_side as bench
from tests.training.conftest import make_tiny_hf

pytest.importorskip("trl", reason="trl is a dev dependency (pyproject.toml)")


def test_sft_and_grpo_side_by_side_on_a_tiny_model(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from core.local_lm import obtain_smollm2

    tok = AutoTokenizer.from_pretrained(str(obtain_smollm2(log=lambda _m: None)))
    tiny = make_tiny_hf(tmp_path / "tiny", tok)
    monkeypatch.setattr("core.local_lm.obtain_smollm2", lambda *a, **k: tiny)
    monkeypatch.setattr(_report, "OUT_DIR", tmp_path / "bench")
    bench.main(["--sft-steps", "2", "--sft-batch", "2", "--heldout", "4", "--grpo-steps", "1", "--grpo-prompts", "2",
                "--threads", "1", "--repeats", "2"])
    res = json.loads((tmp_path / "bench" / "trl_side_by_side.json").read_text())
    sft, grpo = res["inputs"]["sft"], res["inputs"]["grpo"]
    assert res["name"] == "trl_side_by_side" and res["goal"] == 1.2 and res["ours"] > 0 and res["baseline"] > 0
    # the same batches, row for row (TRL's sampler sequential): the same tokens trained on
    assert sft["tokens"]["ours"] == sft["tokens"]["trl"] > 0
    assert set(sft["heldout_loss_after"]) == {"ours", "trl"} and all(v > 0 for v in sft["heldout_loss_after"].values())
    # two fresh runs per side, each repeat's ratio kept beside the medians
    assert len(sft["ratio_per_repeat"]) == len(grpo["ratio_per_repeat"]) == 2
    assert len(sft["tokens_per_s"]["ours"]) == len(sft["tokens_per_s"]["trl"]) == 2
    assert sft["positions"] >= sft["tokens"]["ours"]
    assert res["also"][0]["name"] == "trl_side_by_side_grpo" and res["also"][0]["goal"] == 1.5
    assert set(grpo["heldout_reward_after"]["ours"]) == set(grpo["heldout_reward_after"]["trl"]) == {"arithmetic"}


def test_a_run_dies_with_the_benchmark(tmp_path):
    """SIGKILL of the benchmark ends its spawned run: a leftover run would load the next benchmark's cores."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = "import sys, time; sys.path.insert(0, '.'); from benchmarks.trl_side_by_side import _fresh; _fresh(time.sleep, 120)"
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=bench.ROOT)
    deadline = time.monotonic() + 60
    kids: list[str] = []
    while time.monotonic() < deadline and not any(
            "spawn_main" in open(f"/proc/{k}/cmdline").read() for k in kids if os.path.exists(f"/proc/{k}")):
        time.sleep(0.5)
        kids = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
    workers = [k for k in kids if os.path.exists(f"/proc/{k}") and "spawn_main" in open(f"/proc/{k}/cmdline").read()]
    assert workers, "no spawned run started"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{k}") for k in workers):
        time.sleep(0.5)
    assert not any(os.path.exists(f"/proc/{k}") and "spawn_main" in open(f"/proc/{k}/cmdline").read() for k in workers)
