"""benchmarks/grpo_code.py end to end on Docker with three real EvoEval tasks (one held out) and a
tiny random Llama with SmolLM2's real tokenizer standing in for SmolLM2-135M (whose figures come from
the script itself): a run of the product's config per seed, the summary and the benchmark JSON."""

from __future__ import annotations

import json

import pytest

from benchmarks import _report
from benchmarks import grpo_code as bench
from tests.training.conftest import make_tiny_hf
from tests.training.rl.tasks.test_code import evoeval  # noqa: F401 (the fixture)

pytestmark = pytest.mark.docker


def test_grpo_on_code_tasks_per_seed(evoeval, tmp_path, monkeypatch):  # noqa: F811
    from transformers import AutoTokenizer

    from core.local_lm import obtain_smollm2

    tiny_hf = make_tiny_hf(tmp_path / "tiny", AutoTokenizer.from_pretrained(str(obtain_smollm2(log=lambda _m: None))))
    monkeypatch.setattr("core.local_lm.obtain_smollm2", lambda *a, **k: tiny_hf)
    monkeypatch.setattr(_report, "OUT_DIR", tmp_path / "bench")
    out = tmp_path / "run"
    args = ["--out", str(out), "--seeds", "1", "--steps", "2", "--tasks", str(evoeval), "--heldout", "1"]
    bench.main(args)
    s = json.loads((out / "summary.json").read_text())
    assert len(s["accuracy_before"]) == len(s["accuracy_after"]) == 1
    runs = s["runs"]
    r = runs["0"]  # JSON keys
    assert r["steps"] == 2 and len(r["heldout_tasks"]) == 1 and len(r["train_reward"]) == 2  # every step's
    assert not (out / "seed-0" / "stages").exists()
    b = json.loads((tmp_path / "bench" / "grpo_code.json").read_text())
    assert b["name"] == "grpo_code" and b["inputs"]["seeds"] == [0]
    bench.main(args)  # finished seeds are reused
    assert json.loads((out / "summary.json").read_text())["runs"] == runs
