"""Issue 30's goal on real tasks: the async trainer's idle share on multi-turn, heavy-tailed real episodes vs sync.

SmolLM2-135M-Instruct as shipped calls no tool on the real tasks (benchmarks/rl_agentic_real.py: 0 tool
calls in 18 episodes), so its episodes there are one turn. The policy is made as GLM-5 makes agent SFT
data, on the real tasks themselves:
1. the gold tool sequences of the real tasks (``rl_agentic_real``'s: SWE-bench Verified instances from
   ../shared/swe-real and converted Terminal-Bench seeds, ``swe_envs session run --policy gold``, and
   ``nop`` beside them), the episodes that scored 1 kept by ``training.rl export-sft``;
2. SmolLM2 fine-tuned on them by ``training.sft`` (``model.hf: smollm2``, its own chat template, the
   tools folded in as the RL prompts fold them; ``--sft-steps``);
3. configs/rl_agentic_smollm2.yaml from that model on the same tasks, ``--updates`` updates per mode
   (``--modes``, default sync then async), every buffered episode saved. Sampled at temperature 1 the
   policy follows a gold sequence more or less: episodes run one turn to ``max_turns``, through real
   containers and real verifiers whose times differ by task (a C++ build, a pytest run).
Headline: the trainer's idle share of wall time, async vs sync (lower is better); also the wall time per
trained sample, and per mode the episodes' turns, tool calls, rewards and ledger (in the JSON).
Writes out/bench/rl_agentic_real_sft.json. Run: ``python benchmarks/rl_agentic_real_sft.py`` (the gold/nop
sessions ~4 min with the environments cached, the SFT ~5 min, each RL mode ~15 min on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks._report import Result, write  # noqa: E402
from benchmarks.rl_agentic_real import WORK, gold_sft_rows, inputs, policies, rl, task_arguments  # noqa: E402


def sft(rows: Path, steps: int, lr: float) -> tuple[Path, dict]:
    """SmolLM2 fine-tuned on ``rows`` with its own template (``python -m training.sft``, its own
    process, so its memory is back before the RL run's trainer needs it); the final model (OUT/hf)."""
    out = WORK / "sft"
    data = {"out": str(out), "model": {"hf": "smollm2"},
            "data": {"max_context": 4096, "seed": 0, "weights": {"coding_agent": 1.0},
                     "datasets": [{"path": str(rows), "category": "coding_agent", "min_reward": 1.0}]},
            "train": {"seed": 0, "steps": steps, "threads": 2, "loader": {"batch_size": 1, "seed": 0},
                      "optimizer": {"name": "adamw", "lr": lr, "weight_decay": 0.0},
                      "schedule": {"kind": "cosine", "warmup_steps": 3, "min_lr_ratio": 0.1}}}  # fmt: skip
    config = WORK / "sft.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run([sys.executable, "-m", "training.sft", "--config", str(config)], check=True, cwd=ROOT)
    summary = json.loads((out / "sft.json").read_text())
    print(f"SFT: loss {summary['loss_first']:.3f} -> {summary['loss_last']:.3f} in {summary['trained_steps']} steps",
          flush=True)
    return out / "hf", summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    task_arguments(ap)
    ap.add_argument("--sft-steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1.0e-4, help="the SFT's peak learning rate")
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=1024, help="model tokens per episode, all turns together")
    ap.add_argument("--modes", default="sync,async", help="RL trainer modes to run, in order")
    args = ap.parse_args()
    paths = inputs(args.swe_real, args.seeds, args.swe.split(","), args.terminal.split(","))
    pol = policies(paths)
    model, sft_summary = sft(gold_sft_rows(), args.sft_steps, args.lr)
    modes = [m for m in args.modes.split(",") if m]
    runs = rl(paths, args.updates, modes, [f"model.hf={model}", f"orchestrator.sampling.max_tokens={args.max_tokens}"],
              prefix="sft_rl")
    inputs_ = {"config": "configs/rl_agentic_smollm2.yaml", "model": "SmolLM2-135M-Instruct SFT'd on the gold episodes",
               "sft_steps": args.sft_steps, "lr": args.lr, "max_tokens": args.max_tokens, "updates": args.updates,
               "swe": args.swe, "terminal": args.terminal, "policies": pol,
               "sft": {k: v for k, v in sft_summary.items() if isinstance(v, int | float | str)}, "runs": runs}
    if not {"async", "sync"} <= runs.keys():
        raise SystemExit(f"--modes {args.modes}: the comparison needs both async and sync")
    a, s = runs["async"], runs["sync"]
    also = [Result("rl_agentic_real_sft_wall_per_sample", a["wall_s"] / max(a["samples"], 1),
                   s["wall_s"] / max(s["samples"], 1), "s per trained sample", higher_is_better=False,
                   ours_label="async", baseline_label="sync")]
    write(__file__, Result("rl_agentic_real_sft", a["idle_ratio"], s["idle_ratio"], "trainer idle share of wall time",
                           higher_is_better=False,
                           ours_label="async, SmolLM2 SFT'd on gold tool sequences, real tasks, multi-turn",
                           baseline_label="sync, the same"), inputs_, also)


if __name__ == "__main__":
    main()
