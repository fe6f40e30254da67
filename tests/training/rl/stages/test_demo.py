"""The demo: its summary (hand-computed), its files from a run's curves, and its CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.training.rl.stages.conftest import tiny_stages
from training.rl.stages.demo import plot, summarize
from training.rl.stages.runner import curves_of


def test_demo_files_from_curves(full_run, tmp_path):
    _, state = full_run
    curves = curves_of(state)
    for s in curves["stages"]:
        s["task"] = "plus"
    curves["stages"][2]["kind"] = "rl"
    summary = summarize(curves)
    assert set(summary) >= {"a_after_rl_a", "a_after_rl_b", "a_after_distill", "recovered_fraction"}
    plot(curves, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_summary_is_hand_computed():
    def stage(name, kind, task, a_vals, b_vals):
        pts = [{"reward": {"A": a, "B": b}} for a, b in zip(a_vals, b_vals, strict=True)]
        return {"name": name, "kind": kind, "task": task, "points": pts}

    curves = {"stages": [
        stage("sft", "sft", "A", [0.0, 0.1], [0.0, 0.1]),
        stage("rl_A", "rl", "A", [0.1, 0.5, 0.6, 0.7], [0.1, 0.1, 0.1, 0.1]),  # A ends at mean(.5,.6,.7) = .6
        stage("rl_B", "rl", "B", [0.6, 0.3, 0.2, 0.1], [0.1, 0.6, 0.8, 1.0]),  # A falls to .2, B rises to .8
        stage("distill", "distill", "A", [0.2, 0.4, 0.5, 0.6], [0.8, 0.7, 0.7, 0.7]),  # A back to .5
    ]}  # fmt: skip
    got = summarize(curves)
    assert got["a_before_rl"] == 0.1 and got["a_after_rl_a"] == pytest.approx(0.6)
    assert got["a_after_rl_b"] == pytest.approx(0.2) and got["b_after_rl_b"] == pytest.approx(0.8)
    assert got["a_after_distill"] == pytest.approx(0.5) and got["b_after_distill"] == pytest.approx(0.7)
    assert got["recovered_fraction"] == pytest.approx(0.75)  # (.5 - .2) / (.6 - .2)


def test_demo_cli_writes_curves_json_and_png(tmp_path):
    """`python -m training.rl demo --out OUT --config C`: the acceptance interface, on a tiny
    config (the shipped one is measured by `make rl-demo`): reward per step per stage, the
    A/B/distillation summary, a PNG; a re-run resumes (nothing left to run) and rewrites them."""
    import yaml

    cfg = tiny_stages(
        tasks={"plus": {"kind": "shift", "digits": 1}, "minus": {"kind": "shift", "digits": 1, "offset": -1, "marker": "m1"}},
        stages=[{"name": "sft", "kind": "sft", "steps": 1, "tasks": {"plus": 1, "minus": 1}},
                {"name": "rl_A", "kind": "rl", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
                {"name": "rl_B", "kind": "rl", "steps": 2, "tasks": {"minus": 1}, "teacher_for": ["minus"]},
                {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1, "minus": 1}}],
    )  # fmt: skip
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    out = tmp_path / "out"
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "training.rl", "demo", "--out", str(out), "--config", str(path)],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        curves = json.loads((out / "curves.json").read_text())
        assert [(s["name"], [p["step"] for p in s["points"]]) for s in curves["stages"]] == [
            ("sft", [0, 1]), ("rl_A", [0, 1, 2]), ("rl_B", [0, 1, 2]), ("distill", [0, 1])]
        assert all(set(p["reward"]) == {"plus", "minus"} for s in curves["stages"] for p in s["points"])
        assert curves["summary"]["task_a"] == "plus" and curves["summary"]["task_b"] == "minus"
        assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "summary:" in r.stdout
