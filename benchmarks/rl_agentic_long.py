"""Issue 30's goal at length: the async trainer's idle share on long, heavy-tailed multi-turn real episodes vs sync.

The earlier runs on real tasks (``rl_agentic_real_sft.py``: SmolLM2 on CPU) were 2 updates of 1-3 turn
episodes whose wall time was the model's generation. This one makes the environments the tail: the tiny
GLM-5-shaped model of configs/rl_agentic_tiny.yaml (a few ms per token on CPU) is fine-tuned, as GLM-5
makes agent SFT data, on the real tasks' gold episodes, then trained by RL on those tasks with a long
horizon (``--max-turns``, ``--max-tokens``) for ``--updates`` updates per mode:

1. the tasks of ``rl_agentic_real`` (SWE-bench Verified instances from ../shared/swe-real, converted
   Terminal-Bench seeds: EvoEval, Aider-polyglot in Python and C++), gold and nop through
   ``swe_envs session run`` (gold 1 and nop 0 expected on every task);
2. the gold episodes that scored 1 (``export-sft``), user turns with thinking off, train the tiny model
   (``training.sft``, ``--sft-steps``);
3. configs/rl_agentic_tiny.yaml from that checkpoint on the real tasks, sync then async. Sampled at
   temperature 1 the policy follows a gold sequence more or less; each tool call runs in the task's
   container and each verdict is the task's own verifier (a pytest run, a C++ build and its tests), so
   episodes differ in turns and in environment seconds — the tail the async schedule is for.
Headline: the trainer's idle share of wall time, async vs sync (lower is better); also the wall time per
trained sample. The JSON has per mode the episodes' turns, tool calls, rewards, environment seconds per
episode and per verify (median, p90, max) and the ledger.
Writes out/bench/rl_agentic_long.json. Run: ``python benchmarks/rl_agentic_long.py [--updates 8]``
(measured 2026-12-05, environments cached, 2 cores: the gold/nop sessions ~1 min, the SFT ~6 min, each RL mode ~4 min).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._report import Result, write  # noqa: E402
from benchmarks.rl_agentic import CONFIG, sft, thinking_off  # noqa: E402
from benchmarks.rl_agentic_real import WORK, gold_sft_rows, inputs, policies, rl, task_arguments  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    task_arguments(ap)
    ap.add_argument("--sft-steps", type=int, default=200)
    ap.add_argument("--updates", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=16, help="model turns per episode")
    ap.add_argument("--max-tokens", type=int, default=1024, help="model tokens per episode, all turns together")
    ap.add_argument("--chunk-tokens", type=int, default=128,
                    help="tokens per rollout round (each round re-reads the context: long contexts want long rounds)")
    ap.add_argument("--modes", default="sync,async", help="RL trainer modes to run, in order")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not {"async", "sync"} <= set(modes):
        raise SystemExit(f"--modes {args.modes}: the comparison needs both async and sync")
    paths = inputs(args.swe_real, args.seeds, args.swe.split(","), args.terminal.split(","))
    pol = policies(paths)
    # the GLM-5 template's rows: user turns with thinking off, as the RL prompts render them
    ckpt, sft_summary = sft(thinking_off(gold_sft_rows("gold_sft_glm.jsonl")), args.sft_steps, WORK / "long")
    runs = rl(paths, args.updates, modes, [f"init_checkpoint={ckpt}", f"orchestrator.sampling.max_tokens={args.max_tokens}",
                                           f"orchestrator.rollout.chunk_tokens={args.chunk_tokens}"],
              prefix="long_rl", config=CONFIG, task_args={"max_turns": args.max_turns})
    a, s = runs["async"], runs["sync"]
    inputs_ = {"config": "configs/rl_agentic_tiny.yaml", "model": "the tiny model SFT'd on the real tasks' gold episodes",
               "sft_steps": args.sft_steps, "sft_loss": [sft_summary["loss_first"], sft_summary["loss_last"]],
               "max_turns": args.max_turns, "max_tokens": args.max_tokens, "chunk_tokens": args.chunk_tokens,
               "updates": args.updates,
               "swe": args.swe, "terminal": args.terminal, "policies": pol, "runs": runs}
    also = [Result("rl_agentic_long_wall_per_sample", a["wall_s"] / max(a["samples"], 1),
                   s["wall_s"] / max(s["samples"], 1), "s per trained sample", higher_is_better=False,
                   ours_label="async", baseline_label="sync")]
    write(__file__, Result("rl_agentic_long", a["idle_ratio"], s["idle_ratio"], "trainer idle share of wall time",
                           higher_is_better=False,
                           ours_label="async, tiny model SFT'd on gold tool sequences, real tasks, long horizon",
                           baseline_label="sync, the same"), inputs_, also)


if __name__ == "__main__":
    main()
