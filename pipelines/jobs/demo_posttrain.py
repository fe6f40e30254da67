"""The demo's second half: the mid-trained GLM-5-shaped model through post-training and out.

    sft            ``training.sft`` from the mid-trained checkpoint (``init_from``): the bundled sample
                   conversations (chat, reasoning, coding agent) plus arithmetic problems with their
                   answers, in the GLM-5 chat template (its tokens are in the pretraining BPE)
    rl             one RL stage (``training.rl.stages``) on the arithmetic text task, from the SFT checkpoint
    distill        on-policy distillation with the SFT checkpoint as the task's teacher
    export         ``training.hf export`` of the distilled checkpoint, loaded back by transformers and
                   its logits compared with ours

Each stage starts from the checkpoint the previous one wrote (tokenizer beside it) and returns a
record: name, seconds, input and output checkpoint, and one headline metric.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from core.config import StrictModel
from training.rl.stages.config import StageRolloutConfig
from training.rl.tasks.arithmetic import ArithmeticTask, ArithmeticTaskConfig

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "training" / "sft" / "sample"


class DemoPostConfig(StrictModel):
    sft_steps: int = Field(default=12, ge=0)  # 0 stops the demo after mid-training
    sft_batch_size: int = Field(default=4, gt=0)
    sft_max_context: int = Field(default=512, gt=0)
    sft_lr: float = Field(default=3e-3, gt=0)
    arithmetic_conversations: int = Field(default=256, ge=0)  # SFT examples of the RL task's format
    task: ArithmeticTaskConfig = ArithmeticTaskConfig(kind="arithmetic", ops=["+"], max_operand=9)
    rl_steps: int = Field(default=6, gt=0)
    rl_lr: float = Field(default=3e-4, gt=0)  # also distillation's
    distill_steps: int = Field(default=3, gt=0)
    rollout: StageRolloutConfig = StageRolloutConfig(group_size=8, prompts_per_step=8, max_tokens=4)
    eval_prompts: int = Field(default=32, gt=0)
    eval_temperature: float = Field(default=1.0, ge=0)  # 1: the sampling policy's expected reward (smoother than greedy)


def _record(name: str, t0: float, start: Any, end: Any, metric: str, value: Any) -> dict[str, Any]:
    return {"name": name, "seconds": round(time.monotonic() - t0, 1), "input_checkpoint": str(start) if start else None,
            "output_checkpoint": str(end), "metric": metric, "value": value}


def sft(cfg: DemoPostConfig, start: Path, out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from training.sft.__main__ import SFTConfig, run

    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    arith = out / "arithmetic.jsonl"
    task = ArithmeticTask("arithmetic", cfg.task)
    rows = task.conversations(cfg.arithmetic_conversations, np.random.default_rng(0))
    arith.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    datasets = [{"path": str(SAMPLES / f"{c}.jsonl"), "category": c} for c in ("chat", "reasoning")]
    datasets += [{"path": str(SAMPLES / "coding_agent.jsonl"), "category": "coding_agent", "min_reward": 1.0}]
    datasets += [{"path": str(arith), "category": "arithmetic"}] if rows else []
    scfg = SFTConfig.model_validate({
        "out": str(out), "init_from": str(start),
        "data": {"mode": "interleaved", "max_context": cfg.sft_max_context, "datasets": datasets,
                 "weights": {"chat": 1.0, "reasoning": 1.0, "coding_agent": 1.0, "arithmetic": 2.0}},
        "train": {"steps": cfg.sft_steps, "threads": 1, "loader": {"batch_size": cfg.sft_batch_size},
                  "optimizer": {"name": "adamw", "lr": cfg.sft_lr, "weight_decay": 0.0},
                  "schedule": {"kind": "constant", "warmup_steps": 0}},
    })  # fmt: skip
    s = run(scfg, log=lambda m: log("   " + m))
    return _record("sft", t0, start, s["checkpoint"], "loss first -> last", [s["loss_first"], s["loss_last"]])


def rl_and_distill(cfg: DemoPostConfig, start: Path, out: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """One RL stage then distillation (teacher: the SFT checkpoint), in one stage runner."""
    from training.rl.stages.config import StagesConfig
    from training.rl.stages.runner import StageRunner

    scfg = StagesConfig.model_validate({
        "threads": 1, "model": {"checkpoint": str(start)}, "teachers": {"arithmetic": str(start)},
        "optimizer": {"name": "adamw", "lr": cfg.rl_lr, "weight_decay": 0.0},
        "rollout": cfg.rollout.model_dump(), "eval": {"prompts": cfg.eval_prompts, "every": 1000, "temperature": cfg.eval_temperature},
        "tasks": {"arithmetic": cfg.task.model_dump()},
        "stages": [{"name": "rl", "kind": "rl", "steps": cfg.rl_steps, "tasks": {"arithmetic": 1.0}},
                   {"name": "distill", "kind": "distill", "steps": cfg.distill_steps, "tasks": {"arithmetic": 1.0}}],
    })  # fmt: skip
    state = StageRunner(scfg, out, log=lambda m: log("   " + m)).run()
    records, prev = [], start
    for d in state["completed"]:
        evals = [p for p in d["curve"] if "reward" in p]
        value = {"reward": [evals[0]["reward"]["arithmetic"], evals[-1]["reward"]["arithmetic"]],
                 "accuracy": [evals[0]["accuracy"]["arithmetic"], evals[-1]["accuracy"]["arithmetic"]]}
        rec = {"name": d["name"], "seconds": d["seconds"], "input_checkpoint": str(prev),
               "output_checkpoint": d["checkpoint"], "metric": "held-out arithmetic reward/accuracy before -> after",
               "value": value}
        if d["kind"] == "distill":
            rec["teacher"] = str(start)
        records.append(rec)
        prev = d["checkpoint"]
    return records


def export(start: Path, out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Our checkpoint -> a Hugging Face directory; transformers loads it and gives our logits."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.hf.convert import export_checkpoint, logits

    t0 = time.monotonic()
    export_checkpoint(start, out, log=lambda m: log("   " + m))
    tok = AutoTokenizer.from_pretrained(str(out))
    ids = tok.encode("def fibonacci(n):\n    return n if n < 2 else", add_special_tokens=False)
    model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].float()
    diff = float((theirs - logits(start, ids)).abs().max())
    log(f"   transformers {type(model).__name__} loads {out}: max |logit difference| {diff:.2e} over {len(ids)} tokens")
    return _record("export", t0, start, out, "max abs logit difference, transformers vs ours", diff)
