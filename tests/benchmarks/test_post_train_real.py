"""`make post-train-real`'s orchestration end to end on a tiny random Llama made by transformers
itself (standing in for SmolLM2-135M, whose real run takes half an hour on two cores: its figures
come from `python benchmarks/post_train_real.py`), on the real SFT data the samples build: SFT ->
GRPO per seed -> RL + on-policy distillation, each from the product's configs, and the summary's shape."""

from __future__ import annotations

import json

import pytest

from benchmarks import post_train_real as bench


def test_sft_grpo_distillation_summary(tiny_smollm2, tmp_path):
    out = tmp_path / "run"
    bench.main(["--out", str(out), "--seeds", "2", "--opd-seeds", "2", "--sft-steps", "2", "--rl-steps", "1"])
    s = json.loads((out / "summary.json").read_text())
    assert s["model"] == str(tiny_smollm2)
    sft = s["sft"]
    assert sft["trained_steps"] == 2 and sft["heldout_samples"] == 48 and sft["checkpoint"] == str(out / "sft/hf")
    assert set(sft["samples"]) >= {"chat", "arithmetic"} and sft["heldout_loss_before"] > 0
    g = s["grpo"]
    assert g["seeds"] == [0, 1] and len(g["accuracy_before"]) == len(g["accuracy_after"]) == 2
    assert all(r["steps"] == 1 for r in g["runs"].values())
    assert (out / "grpo/seed-1/pipeline.json").is_file()
    # every GRPO run starts from the same SFT checkpoint and the same held-out set: the same "before"
    assert g["accuracy_before"][0] == g["accuracy_before"][1] and g["reward_before"][0] == g["reward_before"][1]
    o = s["opd"]
    assert o["seeds"] == [0, 1] and set(o["runs"]) == {"0", "1"}
    assert (out / "opd/seed-1/pipeline.json").is_file()
    fractions = []
    for r in o["runs"].values():
        assert set(r["after_sft"]) == set(r["after_rl"]) == set(r["after_distill"]) == {"mul", "words"}
        assert len(r["seconds"]) == 2 and set(r["lowered_by_rl"]) <= {"mul", "words"}
        lost = sum(r["after_sft"][t] - r["after_rl"][t] for t in r["lowered_by_rl"])
        back = sum(r["after_distill"][t] - r["after_rl"][t] for t in r["lowered_by_rl"])
        if r["lowered_by_rl"]:
            assert lost > 0 and r["recovered_fraction"] == pytest.approx(back / lost, abs=1e-3)
            fractions.append(r["recovered_fraction"])
        else:
            assert r["recovered_fraction"] is None and "nothing to recover" in r["note"]
    # both runs start from the same SFT checkpoint and evaluate on the same held-out sets
    assert o["runs"]["0"]["after_sft"] == o["runs"]["1"]["after_sft"]
    assert o["runs_with_a_drop"] == len(fractions)
    if fractions:
        assert o["recovered_fraction"] == pytest.approx(sum(fractions) / len(fractions), abs=1e-3)
        assert o["recovered_fraction_min_max"] == [min(fractions), max(fractions)]
    else:
        assert o["recovered_fraction"] is None
    bench_json = json.loads((tmp_path / "bench" / "post_train_real.json").read_text())
    assert bench_json["name"] == "post_train_real" and bench_json["also"][0]["name"] == "post_train_real_sft_loss"
    # a rerun reuses the finished parts (nothing retrained: the same summary)
    bench.main(["--out", str(out), "--seeds", "2", "--opd-seeds", "2", "--sft-steps", "2", "--rl-steps", "1"])
    again = json.loads((out / "summary.json").read_text())
    assert {k: again[k] for k in ("sft", "grpo", "opd")} == {k: s[k] for k in ("sft", "grpo", "opd")}
