"""The demo's post-training half (pipelines.jobs.demo_posttrain) on a small stand-in for the
mid-trained checkpoint (our tiny model, a BPE holding the chat template's tokens): SFT -> RL ->
distillation -> HF export, each record naming the checkpoint it started from and the one it wrote."""

from __future__ import annotations

import pytest

from pipelines.jobs import demo_posttrain as post
from tests.training.conftest import make_checkpoint, make_tokenizer


@pytest.mark.slow
def test_post_training_hands_each_checkpoint_on(tmp_path):
    start = make_checkpoint(tmp_path / "midtrain", make_tokenizer(tmp_path / "tokenizer.json"))
    cfg = post.DemoPostConfig(sft_steps=3, sft_max_context=128, arithmetic_conversations=32, rl_steps=1,
                              distill_steps=1, eval_prompts=4)
    records = [post.sft(cfg, start, tmp_path / "sft", print)]
    records += post.rl_and_distill(cfg, records[-1]["output_checkpoint"], tmp_path / "rl", print)
    records.append(post.export(records[-1]["output_checkpoint"], tmp_path / "hf", print))
    assert [r["name"] for r in records] == ["sft", "rl", "distill", "export"]
    assert records[0]["input_checkpoint"] == str(start)
    for prev, nxt in zip(records, records[1:], strict=False):
        assert nxt["input_checkpoint"] == str(prev["output_checkpoint"])
    assert records[2]["teacher"] == records[0]["output_checkpoint"]
    assert records[-1]["value"] < 1e-3  # transformers gives our logits from the export
