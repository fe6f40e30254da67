"""The GPU check's CPU-testable parts: skip contract, install plan, section runner, config section.
(The Megatron logits comparison itself runs on CPU in test_megatron_bridge.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from training.tools import gpu_check

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip contract is for machines without CUDA")
def test_without_cuda_it_exits_2_with_a_skipped_report(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "training.tools.gpu_check", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert json.loads(out.read_text())["status"] == "skipped"


def wheel(dest: Path, dist: str, version: str, module: str, source: str) -> Path:
    """A real (tiny) pure-python wheel: the module and its dist-info."""
    path = dest / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}.py", source)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_install_plan_unpacks_what_is_missing_and_skips_what_is_there(tmp_path, monkeypatch):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    wheel(wheels, "h3_probe", "1.0", "h3_probe", "VALUE = 7\n")
    wheel(wheels, "packaging", "0.0.1", "packaging_unused", "")  # installed here: any version will do
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    plan = {p["wheel"].split("-")[0]: p for p in gpu_check.install(wheels, site)}
    assert plan["h3_probe"]["action"] == "unpack"
    assert plan["packaging"]["action"] == "skip" and "already importable" in plan["packaging"]["why"]
    import h3_probe

    assert h3_probe.VALUE == 7 and str(site) in sys.path
    again = {p["wheel"].split("-")[0]: p for p in gpu_check.install_plan(wheels, site)}
    assert again["h3_probe"]["why"] == "already unpacked in site"
    sys.modules.pop("h3_probe")


def test_sections_run_in_budget_and_failures_are_recorded(tmp_path):
    def runner(name, budget):
        if name == "boom":
            raise RuntimeError("CUDA error: device-side assert")
        time.sleep(0.2)
        return {"ok": True, "budget": budget}

    out = tmp_path / "r.json"
    report = gpu_check.run_all(out, 100, {"a": 30, "boom": 30}, runner)
    assert report["sections"]["a"] == {"ok": True, "budget": 30}
    assert report["sections"]["boom"]["error"].startswith("RuntimeError: CUDA error")
    assert report["status"] == "failed" and json.loads(out.read_text()) == report
    tight = gpu_check.run_all(out, 5.1, {"a": 30, "b": 30}, runner)  # a leaves < 5 s for b
    assert tight["sections"]["a"]["budget"] == pytest.approx(5.1, abs=0.05)
    assert tight["sections"]["b"] == {"ok": False, "error": "skipped: time budget used up"}


def test_megatron_config_section_maps_glm5_with_dsa():
    res = gpu_check.section_megatron_config()
    assert res["class"] == "MLATransformerConfig" and res["num_layers"] == 78
    assert res["experimental_attention_variant"] == "dsa"
    assert (res["dsa_indexer_n_heads"], res["dsa_indexer_head_dim"], res["dsa_indexer_topk"]) == (
        32,
        128,
        2048,
    )
