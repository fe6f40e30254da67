"""Async vs sync RL on multi-turn, tool-calling episodes in real environment sessions (issue 30's goal:
the async trainer's idle ratio on multi-turn, heavy-tailed real episodes vs sync).

No policy we can run calls tools by itself: the random tiny model never does, and SmolLM2-135M-Instruct
called none in 8 episodes (docs/rl-async.md). So the policy is made as GLM-5 makes agent SFT data:
1. the gold tool sequences of the samples' calc SWE instance and Harbor task, replayed in sessions
   (``swe_envs session run --policy gold``: reward 1 each), kept by ``training.rl export-sft``;
2. the tiny model of configs/rl_agentic_tiny.yaml (its shape, SmolLM2's vocabulary) trained on them
   by ``training.sft`` (``--sft-steps``), user turns rendered with thinking off as the RL prompts are;
3. configs/rl_agentic_tiny.yaml from that checkpoint, ``--updates`` updates in each mode (sync, then
   async), every buffered group saved (``orchestrator.save_rollouts``). Sampled at temperature 1,
   the policy follows the tool sequence more or less: an episode runs from one turn to ``max_turns``.
Headline: the trainer's idle share of wall time, async vs sync (lower is better); also the wall time
per trained sample. The JSON has each mode's episode turns, tool calls, rewards and ledger.
Writes out/bench/rl_agentic.json. Run: `python benchmarks/rl_agentic.py [--sft-steps 120] [--updates 3]`
(~30 min on 2 cores: the SFT ~13, each RL run ~5).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks._report import OUT_DIR, Result, write  # noqa: E402
from core.cli import load_cli_config  # noqa: E402
from core.config import validate_config  # noqa: E402
from samples.agentic import build_agentic  # noqa: E402

WORK = OUT_DIR / "rl_agentic"
CONFIG = ROOT / "configs" / "rl_agentic_tiny.yaml"


def gold_rows(paths: dict[str, Path]) -> Path:
    """The gold episodes as SFT rows (export-sft), each user turn with thinking off."""
    from training.rl.export import export

    runs = {"swe": ["--instances", str(paths["swe_instances"]), "--repos", str(paths["swe_repos"])],
            "terminal": ["--tasks", str(paths["terminal"])]}
    for name, where in runs.items():
        subprocess.run([sys.executable, "-m", "swe_envs", "session", "run", *where, "--policy", "gold",
                        "--output", str(WORK / f"gold_{name}")], check=True, cwd=ROOT)
    kept = WORK / "gold_sft.jsonl"
    counts = export([WORK / f"gold_{n}" / "trajectories.jsonl" for n in runs], kept, 1.0)
    if counts["kept"] != len(runs):
        raise SystemExit(f"the gold episodes did not all score 1: {dict(counts)}")
    return thinking_off(kept)


def thinking_off(kept: Path) -> Path:
    """SFT rows rewritten with every user turn's thinking off, as the RL prompts render the last user
    turn (``orchestrator.thinking: false``)."""
    rows = [json.loads(line) for line in kept.read_text().splitlines()]
    for r in rows:
        r["messages"] = [dict(m, thinking=False) if m.get("role") == "user" else m for m in r["messages"]]
    kept.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return kept


def sft(rows: Path, steps: int, work: Path = WORK) -> tuple[str, dict]:
    """The tiny agentic model trained on the gold rows (into WORK/sft); its final checkpoint."""
    from core.local_lm import obtain_smollm2
    from training.sft.__main__ import SFTConfig, run

    model = yaml.safe_load(CONFIG.read_text())["model"]
    data = {"out": str(work / "sft"),
            "data": {"mode": "turn", "max_context": 4096, "seed": 0, "weights": {"coding_agent": 1.0},
                     "datasets": [{"path": str(rows), "category": "coding_agent", "min_reward": 1.0}]},
            "tokenizer": {"path": str(obtain_smollm2() / "tokenizer.json"), "eos_token": "<|endoftext|>"},
            "train": {"seed": 0, "steps": steps, "threads": 2, "loader": {"batch_size": 1, "seed": 0}, "model": model,
                      "optimizer": {"name": "adamw", "lr": 3.0e-3, "weight_decay": 0.0},
                      "schedule": {"kind": "cosine", "warmup_steps": 5, "min_lr_ratio": 0.1}}}  # fmt: skip
    summary = run(validate_config(SFTConfig, data, source="rl_agentic"), log=lambda m: print(m, flush=True))
    print(f"SFT: loss {summary['loss_first']:.3f} -> {summary['loss_last']:.3f} in {summary['trained_steps']} steps",
          flush=True)
    # the latest step: a re-run resumes a finished SFT and trains nothing (its summary names no new checkpoint)
    from training.checkpoint import checkpoint_step

    return str(checkpoint_step(work / "sft" / "checkpoints")), summary


def run_summary(out: Path, summary: dict) -> dict:
    """One RL run's figures from its OUT (metrics.jsonl, rollouts.jsonl) and ``run_training``'s summary."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    eps = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    last = rows[-1]
    return {"wall_s": last["wall_s"], "samples": last["trained_total"], "idle_ratio": last["idle_ratio"],
            "reward": [r["reward"] for r in rows], "ledger_ok": summary["ledger"]["ok"],
            "ledger": {k: v for k, v in summary["ledger"].items() if isinstance(v, int | bool)},
            "episodes": len(eps), "episode_turns": sorted(Counter(len(e["turns"]) for e in eps).items()),
            "tool_calls": sum(e["reward_info"].get("tool_calls", 0) for e in eps),
            "episode_rewards": [e["reward"] for e in eps],
            # environment seconds per episode (first step to verdict) and per verify: the tail the schedule meets
            "episode_s": _spread([e["reward_info"].get("episode_s") for e in eps]),
            "verify_s": _spread([e["reward_info"].get("verify_s") for e in eps]),
            "tasks": sorted(Counter(e.get("task", "?") for e in eps).items())}  # fmt: skip


def _spread(xs: list) -> dict:
    """The middle value (the upper one of an even count), the 90th percentile and the max of the
    numbers in ``xs`` (None where an episode has none)."""
    xs = sorted(x for x in xs if isinstance(x, int | float))
    if not xs:
        return {}
    return {"n": len(xs), "p50": xs[len(xs) // 2], "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))], "max": xs[-1]}


def rl(paths: dict[str, Path], ckpt: str, updates: int) -> dict:
    from training.rl.trainer.config import RLAsyncConfig
    from training.rl.trainer.run import run_training

    tasks = yaml.safe_load(CONFIG.read_text())["orchestrator"]["tasks"]
    for t in tasks:
        t["args"].update({"instances": str(paths["swe_instances"]), "repos": str(paths["swe_repos"])}
                         if t["kind"] == "swe" else {"tasks": str(paths["terminal"])})
    res = {}
    for mode in ("sync", "async"):
        cfg = load_cli_config(RLAsyncConfig, CONFIG, [
            f"trainer.mode={mode}", f"trainer.updates={updates}", f"orchestrator.tasks={json.dumps(tasks)}",
            f"init_checkpoint={ckpt}", "orchestrator.save_rollouts=true"])
        out = WORK / f"rl_{mode}"
        shutil.rmtree(out, ignore_errors=True)
        summary = run_training(cfg, out, log=lambda m: None)
        res[mode] = run_summary(out, summary)
        print(f"rl {mode}: {res[mode]}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sft-steps", type=int, default=120)
    ap.add_argument("--updates", type=int, default=3)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    paths = build_agentic(WORK / "agentic")
    ckpt, sft_summary = sft(gold_rows(paths), args.sft_steps)
    res = rl(paths, ckpt, args.updates)
    a, s = res["async"], res["sync"]
    inputs = {"config": "configs/rl_agentic_tiny.yaml", "updates": args.updates, "sft_steps": args.sft_steps,
              "sft_loss": [sft_summary["loss_first"], sft_summary["loss_last"]], "runs": res}
    also = [Result("rl_agentic_wall_per_sample", a["wall_s"] / a["samples"], s["wall_s"] / s["samples"],
                   "s per trained sample", higher_is_better=False, ours_label="async", baseline_label="sync")]
    write(__file__, Result("rl_agentic", a["idle_ratio"], s["idle_ratio"], "trainer idle share of wall time",
                           higher_is_better=False, ours_label="async trainer, multi-turn tool-calling episodes",
                           baseline_label="sync, the same episodes' setup"), inputs, also)


if __name__ == "__main__":
    main()
