"""The stage runner on tiny shapes: SFT (through the trainer) -> RL -> agentic RL ->
distillation, the teacher registry, bit-exact resume at a stage boundary. Mechanics only (two
steps per stage): learning itself is measured by `make rl-demo`."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from safetensors.torch import load_file

from core.errors import ConfigError
from tests.training.rl.stages.conftest import tiny_stages
from training.policy import load_policy
from training.rl.stages.runner import StageRunner


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


def test_a_stage_starts_from_the_previous_stages_last_evaluation_which_is_its_checkpoints(full_run, tmp_path):
    """Step 0 of each later stage is not evaluated again: it is the previous stage's last point, and
    that equals a fresh evaluation of the checkpoint the stage starts from (SFT's in-memory model
    and the RL stages' saved ones alike)."""
    _, state = full_run
    runner = StageRunner(tiny_stages(), tmp_path, log=lambda _m: None)
    for prev, stage in pairwise(state["completed"]):
        last, first = prev["curve"][-1], stage["curve"][0]
        assert first == {"step": 0, "reward": last["reward"], "accuracy": last["accuracy"]}
        assert runner.evaluate(load_policy(prev["checkpoint"])) == (last["reward"], last["accuracy"]), prev["name"]

    class Counting(StageRunner):
        calls = 0

        def evaluate(self, model):
            Counting.calls += 1
            return super().evaluate(model)

    two = tiny_stages(stages=[{"name": "a", "kind": "rl", "steps": 1, "tasks": {"plus": 1}},
                              {"name": "b", "kind": "rl", "steps": 1, "tasks": {"plus": 1}}])
    Counting(two, tmp_path / "two", log=lambda _m: None).run()
    assert Counting.calls == 3  # a: start and end; b: its end only


def test_resume_at_a_stage_boundary_is_bit_exact(full_run, tmp_path):
    out, state = full_run
    cfg = tiny_stages()
    first = StageRunner(cfg, tmp_path, log=lambda _m: None).run(stop_after=2)
    assert [d["name"] for d in first["completed"]] == ["sft", "rl"]
    resumed = StageRunner(cfg, tmp_path, log=lambda _m: None).run()  # a new process would do the same
    for a, b in zip(state["completed"], resumed["completed"], strict=True):
        assert a["curve"] == b["curve"]
        wa = load_file(f"{a['checkpoint']}/model.safetensors")
        wb = load_file(f"{b['checkpoint']}/model.safetensors")
        assert all((wa[k] == wb[k]).all() for k in wa), a["name"]


def test_a_changed_pipeline_is_refused_on_resume(full_run):
    out, _ = full_run
    cfg = tiny_stages()
    cfg.stages[1].name = "renamed"
    with pytest.raises(ConfigError, match="new --out"):
        StageRunner(cfg, out).run()


def test_a_stage_kept_under_its_name_with_other_settings_is_refused_on_resume(full_run, tmp_path):
    """Changing a completed stage's steps, or a setting every stage shares, under the same names would
    have resumed from stale results; a state from before settings were recorded is taken by name."""
    out, state = full_run
    longer = tiny_stages()
    longer.stages[1].steps = 3
    with pytest.raises(ConfigError, match=r"'rl' was run with other stage"):
        StageRunner(longer, out).load_state()
    more = tiny_stages(eval={"prompts": 5, "every": 1})
    with pytest.raises(ConfigError, match=r"'sft' was run with other eval"):
        StageRunner(more, out).load_state()
    assert StageRunner(tiny_stages(threads=2), out).load_state()["completed"]  # threads change no result
    old = json.loads((out / "pipeline.json").read_text())
    for d in old["completed"]:
        d.pop("settings")
    legacy = tmp_path
    (legacy / "pipeline.json").write_text(json.dumps(old))
    assert len(StageRunner(longer, legacy).load_state()["completed"]) == 4


def test_distillation_without_a_teacher_is_a_config_error(tmp_path):
    cfg = tiny_stages(stages=[{"name": "d", "kind": "distill", "steps": 1, "tasks": {"plus": 1}}])
    with pytest.raises(ConfigError, match="no teacher registered"):
        StageRunner(cfg, tmp_path, log=lambda _m: None).run()


def test_an_sft_stage_can_teach_and_distillation_starts_from_zero_advantage(tmp_path):
    """The SFT stage's final checkpoint (written by training.trainer) registered as a teacher;
    distilling right after it, the student is its teacher: the per-token advantage
    sg[log pi_T - log pi_theta] is exactly zero (any other teacher would make it non-zero)."""
    cfg = tiny_stages(
        tasks={"plus": {"kind": "shift", "digits": 1}},
        stages=[{"name": "sft", "kind": "sft", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
                {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1}}],
    )  # fmt: skip
    state = StageRunner(cfg, tmp_path, log=lambda _m: None).run()
    assert state["teachers"] == {"plus": state["completed"][0]["checkpoint"]}
    last = state["completed"][1]["curve"][-1]
    assert last["teacher_minus_student"] == 0.0 and last["loss"] == 0.0


@pytest.mark.parametrize("loss", ["reverse_kl", "forward_kl"])
def test_a_dense_distillation_stage_runs_on_the_whole_distributions(tmp_path, loss):
    """``distill_loss: reverse_kl | forward_kl``: the stage distils with the exact KL at the student's
    states (logged as ``kl``); right after its teacher's stage the KL is zero."""
    cfg = tiny_stages(
        tasks={"plus": {"kind": "shift", "digits": 1}},
        stages=[{"name": "sft", "kind": "sft", "steps": 2, "tasks": {"plus": 1}, "teacher_for": ["plus"]},
                {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"plus": 1}, "distill_loss": loss}],
    )  # fmt: skip
    last = StageRunner(cfg, tmp_path, log=lambda _m: None).run()["completed"][1]["curve"][-1]
    assert abs(last["kl"]) < 1e-6 and abs(last["teacher_minus_student"]) < 1e-6 and "reward" in last
