"""Every stage starts from the checkpoint the previous one handed on, tokenizer and chat template
included: SFT (``python -m training.sft`` with ``init_from``) -> an RL stage on the text task
(``arithmetic``) -> on-policy distillation with the SFT checkpoint as teacher, for our GLM model
and for a transformers model (a tiny random Llama made by transformers, the SmolLM2 tokenizer)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from core.config import validate_config
from tests.training.conftest import make_checkpoint, make_tokenizer
from training.policy import checkpoint_kind, load_policy
from training.rl.stages.config import StagesConfig
from training.rl.stages.runner import StageRunner, app
from training.rl.tasks.arithmetic import ArithmeticTask, ArithmeticTaskConfig, grade
from training.sft.__main__ import SFTConfig, run

TASK = {"kind": "arithmetic", "ops": ["+"], "max_operand": 9}


def _conversations(path: Path, n: int = 64) -> Path:
    task = ArithmeticTask("arith", ArithmeticTaskConfig(**TASK))
    path.write_text("".join(json.dumps(r) + "\n" for r in task.conversations(n, np.random.default_rng(0))))
    return path


def _sft(init_from: Path, data: Path, out: Path, steps: int = 12) -> Path:
    """SFT through the CLI's run() from ``init_from``; returns the checkpoint it hands on."""
    cfg = validate_config(SFTConfig, {
        "out": str(out), "init_from": str(init_from),
        "data": {"max_context": 128, "datasets": [{"path": str(data), "category": "arith"}]},
        "train": {"steps": steps, "threads": 1, "loader": {"batch_size": 4},
                  "optimizer": {"name": "adamw", "lr": 1e-2, "weight_decay": 0.0},
                  "schedule": {"kind": "constant", "warmup_steps": 0}},
    }, "test")  # fmt: skip
    s = run(cfg, log=lambda _m: None)
    if s.get("model_hf"):  # a Hugging Face model: fine-tuned where init_from pointed
        assert Path(s["model_hf"]) == init_from
    else:  # ours: the trainer started from init_from's weights, with its tokenizer
        meta = json.loads((Path(s["checkpoint"]) / "trainer.json").read_text())
        assert meta["config"]["init_from"] == str(checkpoint_kind(init_from)[1])
        tokenizers = [json.loads((d / "tokenizer.json").read_text()) for d in (Path(s["checkpoint"]), checkpoint_kind(init_from)[1])]
        assert tokenizers[0] == tokenizers[1]
    return Path(s["checkpoint"])


def _stages(start: Path, teacher: Path) -> StagesConfig:
    return validate_config(StagesConfig, {
        "seed": 0, "threads": 1, "model": {"checkpoint": str(start)}, "teachers": {"arith": str(teacher)},
        "optimizer": {"name": "adamw", "lr": 1e-2, "weight_decay": 0.0},
        "rollout": {"group_size": 4, "prompts_per_step": 3, "max_tokens": 4},
        "eval": {"prompts": 4, "every": 2}, "tasks": {"arith": TASK},
        "stages": [{"name": "rl", "kind": "rl", "steps": 2, "tasks": {"arith": 1}},
                   {"name": "distill", "kind": "distill", "steps": 1, "tasks": {"arith": 1}}],
    }, "test")  # fmt: skip


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in load_policy(path).module.state_dict().items()}


def _chain(start: Path, tmp_path: Path, kind: str) -> None:
    sft_ckpt = _sft(start, _conversations(tmp_path / "arith.jsonl"), tmp_path / "sft")
    assert checkpoint_kind(sft_ckpt)[0] == kind
    state = StageRunner(_stages(sft_ckpt, sft_ckpt), tmp_path / "stages", log=lambda _m: None).run()
    rl, distill = (Path(d["checkpoint"]) for d in state["completed"])
    assert state["teachers"] == {"arith": str(sft_ckpt)}
    for ckpt in (rl, distill):  # each stage's checkpoint is a whole policy: weights, tokenizer, template
        kind_of, _ = checkpoint_kind(ckpt)
        policy = load_policy(ckpt)
        assert kind_of == kind and policy.codec is not None
        assert policy.codec.chat_prompt([{"role": "user", "content": "What is 1 + 2?"}])
    sft_w, rl_w, distill_w = _weights(sft_ckpt), _weights(rl), _weights(distill)
    assert any(not torch.equal(sft_w[k], rl_w[k]) for k in sft_w), "RL did not start from SFT and move"
    assert any(not torch.equal(rl_w[k], distill_w[k]) for k in rl_w), "distillation did not move"
    assert state["completed"][0]["curve"][0]["accuracy"]["arith"] >= 0


def test_glm_sft_rl_distill_hand_on_checkpoints(rl_assets, tmp_path):
    # the "pretrained" model: its tokenizer already holds the chat template's special tokens
    start = make_checkpoint(tmp_path / "pretrain", make_tokenizer(tmp_path / "tokenizer.json"))
    _chain(start, tmp_path, "glm")


@pytest.mark.slow
def test_hf_sft_rl_distill_hand_on_checkpoints(tiny_hf, tmp_path):
    from transformers import AutoModelForCausalLM

    _chain(tiny_hf, tmp_path, "hf")
    final = tmp_path / "stages" / "stages" / "distill"
    assert AutoModelForCausalLM.from_pretrained(str(checkpoint_kind(final)[1])).config.vocab_size > 0


def test_stages_cli_runs_a_hugging_face_model(tiny_hf, tmp_path, monkeypatch):
    """``python -m training.rl stages --config C`` with ``model: {hf: ...}``, from another directory."""
    import yaml

    monkeypatch.chdir(tmp_path)
    cfg = {"threads": 1, "model": {"hf": str(tiny_hf)}, "optimizer": {"name": "adamw", "lr": 1e-3},
           "rollout": {"group_size": 2, "prompts_per_step": 2, "max_tokens": 3}, "eval": {"prompts": 2},
           "tasks": {"arith": TASK}, "stages": [{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"arith": 1}}]}
    Path("c.yaml").write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["--config", "c.yaml", "--out", "o"])
    assert res.exit_code == 0, res.output
    state = json.loads(Path("o/pipeline.json").read_text())
    assert checkpoint_kind(state["completed"][0]["checkpoint"])[0] == "hf"
    assert json.loads(Path("o/curves.json").read_text())["stages"][0]["points"]


def test_text_and_toy_tasks_need_their_kind_of_policy(rl_assets, tiny_hf):
    from core.errors import ConfigError

    toy = {"tasks": {"plus": {"kind": "shift"}}, "stages": [{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"plus": 1}}]}
    with pytest.raises(ConfigError, match="toy tasks speak their own"):
        StageRunner(validate_config(StagesConfig, {"model": {"hf": str(tiny_hf)}, **toy}), "unused")
    text = {"tasks": {"arith": TASK}, "stages": [{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"arith": 1}}]}
    with pytest.raises(ConfigError, match="a text task needs a policy with a tokenizer"):
        StageRunner(validate_config(StagesConfig, text), "unused")
    with pytest.raises(ConfigError, match="sft stages train a model from scratch"):
        validate_config(StagesConfig, {"model": {"checkpoint": str(rl_assets["ckpt"])}, **text,
                                       "stages": [{"name": "s", "kind": "sft", "steps": 1, "tasks": {"arith": 1}}]})


def test_text_episodes_carry_their_messages(rl_assets):
    from training.rl.stages.episodes import rollout
    from training.serving.sampler import SamplingParams

    policy = load_policy(rl_assets["ckpt"])
    task = ArithmeticTask("arith", ArithmeticTaskConfig(**TASK), policy.codec)
    trajs = rollout(policy, task, task.problems(2, np.random.default_rng(0)), 2,
                    SamplingParams(max_tokens=3, stop_token_ids=task.stop_ids), torch.Generator().manual_seed(0))
    assert len(trajs) == 4 and all(0 <= t.reward <= 1 for t in trajs)
    assert all(t.messages[0]["role"] == "user" and t.messages[-1]["role"] == "assistant" for t in trajs)
    assert trajs[0].prompt_ids == policy.codec.chat_prompt(trajs[0].messages[:1])


def test_arithmetic_grading():
    assert grade("The answer is 12.", 12, 0.5) == 1.0
    assert grade("12 or 13", 13, 0.5) == 1.0  # the last number is the answer
    assert grade("no idea", 12, 0.5) == 0.0
    assert 0 < grade("11", 12, 0.5) < 0.5 and grade("11", 12, 0.0) == 0.0
    task = ArithmeticTask("a", ArithmeticTaskConfig(kind="arithmetic", ops=["-", "*"], words=1.0))
    for p in task.problems(20, np.random.default_rng(1)):
        a, b = (int(x) for x in re.findall(r"\d+", p.messages[0]["content"]))
        assert p.answer in (a - b, a * b) and p.answer >= 0  # word problems never go negative


def test_answer_nll_is_the_reference_answers_loss_under_transformers_itself(tiny_hf, tmp_path):
    """The stages' held-out answer loss: per task, the mean NLL per token of the held-out reference
    answers after their prompts — here equal to what transformers' own forward gives for the chat
    template's rendering of each problem followed by its answer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    runner = StageRunner(_stages(tiny_hf, tiny_hf), tmp_path, log=lambda _m: None)
    got = runner.answer_nll(load_policy(tiny_hf), rows_per_pass=3)  # passes of 3 rows: the sum over passes
    tok = AutoTokenizer.from_pretrained(str(tiny_hf))
    hf = AutoModelForCausalLM.from_pretrained(str(tiny_hf)).eval()
    total, count = 0.0, 0
    for p in runner.eval_sets["arith"]:
        prompt = tok.apply_chat_template(p.messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tok(str(p.answer), add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt_ids + answer_ids])
        with torch.no_grad():
            lp = hf(ids).logits[0, :-1].float().log_softmax(-1)
        for k, t in enumerate(answer_ids):
            total -= float(lp[len(prompt_ids) - 1 + k, t])
            count += 1
    assert set(got) == {"arith"} and got["arith"] == pytest.approx(total / count, abs=1e-3)
