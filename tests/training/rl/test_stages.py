"""The stage pipeline on tiny shapes: SFT (through the trainer) -> RL -> agentic RL ->
distillation, the teacher registry, bit-exact resume at a stage boundary, the demo's files.
Mechanics only (two steps per stage): learning itself is measured by `make rl-demo`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from core.config import validate_config
from core.errors import ConfigError
from tests.training.glm_tiny import tiny_model
from training.rl.demo import plot, summarize
from training.rl.stage_config import PipelineConfig
from training.rl.stages import Pipeline, curves_of


def tiny_pipeline(**over) -> PipelineConfig:
    data = {
        "seed": 3,
        "model": tiny_model(mtp_num_layers=None, num_layers=2).model_dump() | {"vocab_size": 0},
        "optimizer": {"name": "adamw", "lr": 3e-3},
        "rollout": {"group_size": 2, "prompts_per_step": 4, "max_tokens": 3},
        "sft": {"examples": 48, "seq_len": 32, "batch_size": 4},
        "eval": {"prompts": 4, "every": 1},
        "tasks": {"plus": {"kind": "shift", "digits": 1}, "lookup": {"kind": "lookup"}},
        "stages": [
            {"name": "sft", "kind": "sft", "steps": 2, "tasks": {"plus": 1, "lookup": 1}},
            {"name": "rl", "kind": "rl", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
            {"name": "agentic", "kind": "rl", "steps": 1, "tasks": {"lookup": 1}, "teacher_for": ["lookup"]},
            {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1, "lookup": 1}},
        ],
    }
    data.update(over)
    return validate_config(PipelineConfig, data)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    return out, Pipeline(tiny_pipeline(), out, log=lambda _m: None).run()


def test_stages_run_in_order_and_register_teachers(full_run):
    out, state = full_run
    assert [d["name"] for d in state["completed"]] == ["sft", "rl", "agentic", "distill"]
    assert state["teachers"] == {
        "plus": state["completed"][1]["checkpoint"],
        "lookup": state["completed"][2]["checkpoint"],
    }
    sft = state["completed"][0]
    assert "/trainer/" in sft["checkpoint"]  # SFT went through training.trainer's checkpoints
    assert (out / "stages" / "sft" / "shards" / "manifest.json").is_file()
    rl_points = state["completed"][1]["curve"]
    assert [p["step"] for p in rl_points] == [0, 1, 2]
    assert set(rl_points[-1]["reward"]) == {"plus", "lookup"}
    assert "teacher_minus_student" in state["completed"][3]["curve"][-1]  # per-token OPD advantage logged
    assert json.loads((out / "pipeline.json").read_text())["completed"][-1]["name"] == "distill"


def test_resume_at_a_stage_boundary_is_bit_exact(full_run, tmp_path):
    out, state = full_run
    cfg = tiny_pipeline()
    first = Pipeline(cfg, tmp_path, log=lambda _m: None).run(stop_after=2)
    assert [d["name"] for d in first["completed"]] == ["sft", "rl"]
    resumed = Pipeline(cfg, tmp_path, log=lambda _m: None).run()  # a new process would do the same
    for a, b in zip(state["completed"], resumed["completed"], strict=True):
        assert a["curve"] == b["curve"]
        wa = load_file(f"{a['checkpoint']}/model.safetensors")
        wb = load_file(f"{b['checkpoint']}/model.safetensors")
        assert all((wa[k] == wb[k]).all() for k in wa), a["name"]


def test_a_changed_pipeline_is_refused_on_resume(full_run):
    out, _ = full_run
    cfg = tiny_pipeline()
    cfg.stages[1].name = "renamed"
    with pytest.raises(ConfigError, match="new --out"):
        Pipeline(cfg, out).run()


def test_config_errors_name_the_problem():
    with pytest.raises(ConfigError, match="must come first"):
        tiny_pipeline(stages=[{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"plus": 1}},
                              {"name": "sft", "kind": "sft", "steps": 1, "tasks": {"plus": 1}}])  # fmt: skip
    with pytest.raises(ConfigError, match="unknown tasks"):
        tiny_pipeline(stages=[{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"nope": 1}}])
    with pytest.raises(ConfigError, match="one response per prompt"):
        tiny_pipeline(stages=[{"name": "d", "kind": "distill", "steps": 1, "tasks": {"plus": 1}, "group_size": 4}])


def test_distillation_without_a_teacher_is_a_config_error(tmp_path):
    cfg = tiny_pipeline(stages=[{"name": "d", "kind": "distill", "steps": 1, "tasks": {"plus": 1}}])
    with pytest.raises(ConfigError, match="no teacher registered"):
        Pipeline(cfg, tmp_path, log=lambda _m: None).run()


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


def test_cli_dispatcher():
    out = subprocess.run([sys.executable, "-m", "training.rl", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout and "stages" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "training.rl", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown subcommand" in bad.stderr
    demo = subprocess.run([sys.executable, "-m", "training.rl", "demo", "--help"], capture_output=True, text=True, check=True)
    assert "--out" in demo.stdout


def test_shipped_pipeline_configs_load_in_the_recipe_order():
    from training.rl.stages import load_pipeline_config

    tiny = load_pipeline_config("configs/rl_stages_tiny.yaml")
    assert [(s.name, s.kind) for s in tiny.stages] == [("sft", "sft"), ("reasoning_rl", "rl"), ("agentic_rl", "rl"),
                                                       ("general_rl", "rl"), ("distill", "distill")]  # fmt: skip
    # every RL stage registers a teacher, and distillation covers every task type they own
    owned = {t for s in tiny.stages if s.kind == "rl" for t in s.teacher_for}
    assert owned == set(tiny.stages[-1].tasks) and tiny.update.loss.eps_clip_high == 0.28
    demo = load_pipeline_config("configs/rl_stages_demo.yaml")
    assert [s.kind for s in demo.stages] == ["sft", "rl", "rl", "distill"] and demo.eval.every == 1


def test_an_sft_stage_can_teach_and_distillation_starts_from_zero_advantage(tmp_path):
    """The SFT stage's final checkpoint (written by training.trainer) registered as a teacher;
    distilling right after it, the student is its teacher: the per-token advantage
    sg[log pi_T - log pi_theta] is exactly zero (any other teacher would make it non-zero)."""
    cfg = tiny_pipeline(
        tasks={"plus": {"kind": "shift", "digits": 1}},
        stages=[{"name": "sft", "kind": "sft", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
                {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1}}],
    )  # fmt: skip
    state = Pipeline(cfg, tmp_path, log=lambda _m: None).run()
    assert state["teachers"] == {"plus": state["completed"][0]["checkpoint"]}
    last = state["completed"][1]["curve"][-1]
    assert last["teacher_minus_student"] == 0.0 and last["loss"] == 0.0


def test_demo_cli_writes_curves_json_and_png(tmp_path):
    """`python -m training.rl demo --out OUT --config C`: the acceptance interface, on a tiny
    config (the shipped one is measured by `make rl-demo`): reward per step per stage, the
    A/B/distillation summary, a PNG; a re-run resumes (nothing left to run) and rewrites them."""
    import yaml

    cfg = tiny_pipeline(
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
