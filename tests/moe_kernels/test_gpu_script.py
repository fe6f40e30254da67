"""benchmarks/kernels_gpu.py runs end to end (tiny shapes, Triton's interpreter on CPU) and
writes the JSON its GPU run would; without CUDA a real run says "skipped" and exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.moe_kernels.conftest import ON_GPU

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kernels_gpu.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def test_smoke_run_checks_every_section_and_writes_results(tmp_path):
    out = tmp_path / "r" / "kernels.json"
    r = _run("--smoke", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["status"] == "ok" and res["smoke"] and res["failed"] == []
    for section in ("router", "permute", "grouped_gemm_fc1", "grouped_gemm_fc2", "moe_pipeline"):
        assert res[section]["ok"] is True, section
    assert res["permute"]["exact_vs_reference"] and res["permute"]["round_trip_identity"]
    gemm = res["grouped_gemm_fc1"]
    assert {"triton", "loop_matmul", "dense_equal_flops"} <= gemm["forward"].keys()
    assert all("ms" in v for k, v in gemm["forward"].items() if k != "torch_grouped_mm")
    assert set(res["goals"]) == {"grouped_gemm_fraction_of_dense", "permute_fraction_of_hbm_peak"}


@pytest.mark.skipif(ON_GPU, reason="checks the no-CUDA path")
def test_without_cuda_it_says_skipped_and_exits_2(tmp_path):
    out = tmp_path / "kernels.json"
    r = _run(str(out))
    assert r.returncode == 2 and "no CUDA device" in r.stderr
    assert json.loads(out.read_text())["status"] == "skipped"
    assert _run("--help").stdout.startswith("usage:")
