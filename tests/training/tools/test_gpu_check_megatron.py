"""``make gpu-check``'s Megatron sections on the CPU: the same code at toy widths (fp32, our experts
on the pure-torch reference), failures recorded rather than raised, the engine section's answer
where no inference engine imports."""

from __future__ import annotations

import pytest

from training.tools import gpu_check_megatron as g


def test_the_training_section_runs_both_expert_implementations_at_tiny_widths():
    out = g.section_megatron_train(device="cpu", widths="tiny", steps=3)
    assert out["ok"], out
    assert out["megatron"]["expert_kernel"] is None  # Megatron's SequentialMLP
    assert out["grouped_gemm"]["expert_kernel"] == ["reference"]
    assert out["megatron"]["losses"] == pytest.approx(out["grouped_gemm"]["losses"], abs=1e-5)
    assert out["grouped_gemm_ratio"] > 0 and out["megatron"]["mfu"] is None  # no peak FLOPs for a CPU
    e = out["expert_gemm"]
    assert e["kernel"] == "reference" and e["ours"]["max_abs_diff_vs_sequential"] < 1e-5
    assert e["megatron_grouped"].startswith("not run")


def test_a_failing_run_is_recorded_not_raised():
    cfg = g.trainer_config(g.tiny_layer_config(), "grouped_gemm", 2, 2, "bf16")  # bf16 needs CUDA
    out = g.train_run(cfg, "unused", "cpu")
    assert out["ok"] is False and "precision" in out["error"]


def test_peak_flops_by_device_name():
    assert g.peak_flops("NVIDIA H200") == 989e12
    assert g.peak_flops("NVIDIA GH200 480GB") == g.PEAK_BF16["GH200"]
    assert g.peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert g.peak_flops("Some GPU") is None and g.peak_flops(None) is None


def test_the_engine_section_says_when_no_engine_imports(monkeypatch, tmp_path):
    monkeypatch.setattr(g.importlib.util, "find_spec", lambda name: None)
    out = g.section_hf_engine()
    assert out["ok"] and out["result"].startswith("not run: neither vllm nor sglang")
    hf_dir, prompt, ours = g._export_tiny(tmp_path)  # what an engine would load
    assert (hf_dir / "config.json").is_file() and len(ours) == 4
