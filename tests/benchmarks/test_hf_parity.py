"""benchmarks/hf_parity.py end to end on one sequence: six rows (3 architectures x import/export),
each a max abs logit difference held against the 1e-4 bound, the headline the worst of them."""

from __future__ import annotations

import json

from benchmarks import _report
from benchmarks import hf_parity as bench


def test_parity_benchmark_records_both_directions_per_architecture(tmp_path, monkeypatch):
    monkeypatch.setattr(_report, "OUT_DIR", tmp_path)
    bench.main(["--seqs", "1"])
    res = json.loads((tmp_path / "hf_parity.json").read_text())
    rows = {r["name"]: r for r in res["also"]}
    assert set(rows) == {f"hf_parity_{a}_{w}" for a in ("glm_moe_dsa", "glm4_moe", "deepseek_v3")
                         for w in ("import", "export")}
    assert all(0 <= r["ours"] <= 1e-4 and r["goal_met"] for r in rows.values()), {n: r["ours"] for n, r in rows.items()}
    assert res["ours"] == max(r["ours"] for r in rows.values()) and res["goal_met"]
