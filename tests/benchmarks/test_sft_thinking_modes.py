"""benchmarks/sft_thinking_modes.py end to end on a tiny random Llama with SmolLM2's real tokenizer
(standing in for SmolLM2-135M, whose figures come from the script itself): one GLM-5-template SFT
per mode on the real post-training data plus the multi-turn reasoning records, the per-mode summary,
one benchmark row per mode, and a rerun that reuses finished modes."""

from __future__ import annotations

import json

from benchmarks import sft_thinking_modes as bench


def test_one_sft_per_thinking_mode_with_held_out_loss(tiny_smollm2, tmp_path):
    out = tmp_path / "run"
    bench.main(["--out", str(out), "--steps", "1", "--modes", "interleaved,turn"])
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 1 and list(s["modes"]) == ["interleaved", "turn"]
    for row in s["modes"].values():
        assert row["trained_steps"] == 1 and row["heldout_samples"] == 48 and row["heldout_loss_before"] > 0
        assert set(row["samples"]) == {"chat", "tool_calls", "arithmetic", "reasoning"}
    assert not (out / "turn" / "hf").exists()  # the model is not kept: the figures are what the run is for
    b = json.loads((tmp_path / "bench" / "sft_thinking_modes.json").read_text())
    assert b["name"] == "sft_thinking_modes_interleaved" and [r["name"] for r in b["also"]] == ["sft_thinking_modes_turn"]
    bench.main(["--out", str(out), "--steps", "1", "--modes", "interleaved,turn"])  # reused, not retrained
    assert json.loads((out / "summary.json").read_text()) == s


def test_an_unknown_mode_is_refused(capsys):
    import pytest

    with pytest.raises(SystemExit):
        bench.main(["--modes", "interleaved,sometimes"])
    assert "unknown ['sometimes']" in capsys.readouterr().err
