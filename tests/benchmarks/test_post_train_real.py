"""`make post-train-real`'s orchestration end to end on a tiny random Llama made by transformers
itself (standing in for SmolLM2-135M, whose real run takes half an hour on two cores: its figures
come from `python benchmarks/post_train_real.py`), on the real SFT data the samples build: SFT ->
GRPO per seed -> RL + on-policy distillation, each from the product's configs, and the summary's shape."""

from __future__ import annotations

import json

import pytest

from benchmarks import post_train_real as bench
from core.errors import UserError


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
    for key, higher in (("answer_nll", False), ("reward", True)):
        fractions = []
        for r in o["runs"].values():
            m = r[key]
            assert set(m["after_sft"]) == set(m["after_rl"]) == set(m["after_distill"]) == {"mul", "words"}
            assert set(m["worsened_by_rl"]) <= {"mul", "words"}
            sign = 1 if higher else -1
            lost = sum(sign * (m["after_sft"][t] - m["after_rl"][t]) for t in m["worsened_by_rl"])
            back = sum(sign * (m["after_distill"][t] - m["after_rl"][t]) for t in m["worsened_by_rl"])
            if m["worsened_by_rl"]:
                assert lost > 0 and m["recovered_fraction"] == pytest.approx(back / lost, abs=1e-3)
                fractions.append(m["recovered_fraction"])
            else:
                assert m["recovered_fraction"] is None and "nothing to recover" in m["note"]
            if key == "answer_nll":  # the headline per run is the held-out SFT metric's
                assert r["recovered_fraction"] == m["recovered_fraction"] and len(r["seconds"]) == 2
                assert all(v > 0 for v in m["after_sft"].values())  # a mean NLL per answer token
        prefix = "" if key == "answer_nll" else "reward_"
        assert o[f"runs_with_a_{'' if key == 'answer_nll' else 'reward_'}drop"] == len(fractions)
        if fractions:
            assert o[f"{prefix}recovered_fraction"] == pytest.approx(sum(fractions) / len(fractions), abs=1e-3)
            assert o[f"{prefix}recovered_fraction_min_max"] == [min(fractions), max(fractions)]
        else:
            assert o[f"{prefix}recovered_fraction"] is None
    # both runs start from the same SFT checkpoint and evaluate on the same held-out sets
    assert o["runs"]["0"]["answer_nll"]["after_sft"] == o["runs"]["1"]["answer_nll"]["after_sft"]
    assert o["runs"]["0"]["reward"]["after_sft"] == o["runs"]["1"]["reward"]["after_sft"]
    bench_json = json.loads((tmp_path / "bench" / "post_train_real.json").read_text())
    assert bench_json["name"] == "post_train_real" and bench_json["also"][0]["name"] == "post_train_real_sft_loss"
    # a rerun reuses the finished parts (nothing retrained: the same summary)
    bench.main(["--out", str(out), "--seeds", "2", "--opd-seeds", "2", "--sft-steps", "2", "--rl-steps", "1"])
    again = json.loads((out / "summary.json").read_text())
    assert {k: again[k] for k in ("sft", "grpo", "opd")} == {k: s[k] for k in ("sft", "grpo", "opd")}
    # a distillation run kept from before the answer loss was measured is named, not a KeyError
    state = json.loads((out / "opd/seed-1/pipeline.json").read_text())
    for stage in state["completed"]:
        for point in stage["curve"]:
            point.pop("answer_nll", None)
    (out / "opd/seed-1/pipeline.json").write_text(json.dumps(state))
    with pytest.raises(UserError, match="opd/seed-1: a run from before the stages measured the answer loss"):
        bench.main(["--out", str(out), "--seeds", "2", "--opd-seeds", "2", "--sft-steps", "2", "--rl-steps", "1"])
