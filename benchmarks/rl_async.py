"""Asynchronous vs synchronous RL on a heavy-tailed workload (goal: async >= 1.5x faster).

Workload: two toy tasks at ratio ``--plus-ratio``:1 — ``plus`` (the RL demo's task A: answer = the
prompt digit + 1; its reward is the one tracked) and ``long`` (the same rule on a problem whose size
is drawn from a lognormal — median ``--median`` digits, sigma ``--sigma``, capped at ``--max-len`` —
with ``ignore_eos``, so its rollouts run to that heavy-tailed length, like agent rollouts); a tiny
GLM-5-shaped model on CPU warm-started by the RL demo's SFT stage (training.rl.stages.runner) on `plus`;
two rollout-server processes, two task services, the trainer process — all real processes on
127.0.0.1.

Both runs train the same number of updates on the same number of samples (stale samples are kept
and importance-corrected, so none are dropped), timed from the trainer's start (the orchestrator
generates nothing before it). Async trains groups in the order they finish, which favours short
rollouts: the trained tokens of both runs and the per-token ratio are reported too. Baseline: synchronous RL — the orchestrator
generates one batch on the current weights, the trainer trains on it, then the next batch is
generated (rollout servers idle while the trainer trains, the trainer idle while the slowest
rollout finishes). Ours: asynchronous — servers keep generating into the buffer, the trainer
takes each batch at the threshold and pushes weights every update.

Writes out/bench/rl_async.json; prints both idle ratios and the async run's reward curve.
Run: `python benchmarks/rl_async.py [--updates 30] [--batch-groups 12] [--median 16] [--sigma 1.0]` (~6 min).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _report import OUT_DIR, ROOT, Result, write

sys.path.insert(0, str(ROOT))

from core.cli import load_cli_config  # noqa: E402
from training.checkpoint import latest_checkpoint  # noqa: E402
from training.rl.trainer.config import RLAsyncConfig  # noqa: E402
from training.rl.trainer.run import run_training  # noqa: E402


def warm_start(out: Path) -> Path:
    """The RL demo's SFT stage (training.rl.stages.runner) on `plus`, short: the answer format and a weak
    start (~0.35 reward) that RL can climb from."""
    from training.rl.stages.runner import StageRunner, load_stages_config

    cfg = load_stages_config(ROOT / "configs/rl_stages_demo.yaml", [
        'tasks={"plus": {"kind": "shift", "digits": 1, "offset": 1}}',
        "stages=[{name: sft, kind: sft, steps: 20, lr: 6.0e-3, tasks: {plus: 1.0}}]"])
    found = latest_checkpoint(out / "stages" / "sft" / "trainer")
    if found is None:
        state = StageRunner(cfg, out, log=print).run()
        found = Path(state["completed"][-1]["checkpoint"])
    return found


def run(mode: str, args, init: Path, out: Path) -> list[dict]:
    lengths = {"median": args.median, "sigma": args.sigma, "max": args.max_len}
    tasks = [{"name": "plus", "kind": "toy", "ratio": args.plus_ratio, "capacity": 32,
              "args": {"kind": "shift", "digits": 1, "offset": 1}},
             {"name": "long", "kind": "toy", "ratio": 1, "capacity": 32,
              "args": {"kind": "shift", "offset": 1, "marker": "m2", "lengths": lengths, "ignore_eos": True}}]
    cfg = load_cli_config(RLAsyncConfig, ROOT / "configs/rl_async_tiny.yaml", [
        f"init_checkpoint={init}", f"trainer.mode={mode}", f"trainer.updates={args.updates}",
        f"trainer.batch_groups={args.batch_groups}", "trainer.stale_policy=importance", "trainer.staleness=4",
        "trainer.optimizer.lr=2.0e-3", "trainer.update.minibatches=2", f"trainer.push_every={args.push_every}",
        f"trainer.reset_optimizer={str(args.reset_optimizer).lower()}", f"orchestrator.group_size={args.group_size}",
        f"orchestrator.max_ahead_groups={round(args.ahead * args.batch_groups)}", "orchestrator.workers=32",
        f"orchestrator.rollout.replicas={args.servers}", "orchestrator.rollout.capacity=16",
        f"orchestrator.tasks={json.dumps(tasks)}"])
    if out.exists():
        import shutil

        shutil.rmtree(out)
    summary = run_training(cfg, out, log=lambda m: None)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    if not summary["ledger"]["ok"]:
        raise SystemExit(f"{mode}: ledger audit failed: {summary['ledger']}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--batch-groups", type=int, default=12)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--push-every", type=int, default=1)
    ap.add_argument("--reset-optimizer", action=argparse.BooleanOptionalAction, default=False,
                    help="fresh optimizer state after each push (GLM-5 does, pushing every K > 1 updates)")
    ap.add_argument("--ahead", type=float, default=2.0,
                    help="async: groups generating or buffered ahead of the trainer, in batches (bounds staleness)")
    ap.add_argument("--plus-ratio", type=float, default=3.0, help="plus : long groups")
    ap.add_argument("--median", type=float, default=16.0, help="lognormal median rollout length of `long` (tokens)")
    ap.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma (tail weight)")
    ap.add_argument("--max-len", type=int, default=256, help="longest `long` rollout (tokens)")
    args = ap.parse_args()
    work = OUT_DIR / "rl_async"
    init = warm_start(work / "sft")
    print(f"warm start: {init}")
    res = {}
    for mode in ("sync", "async"):
        rows = run(mode, args, init, work / mode)
        last = rows[-1]
        # async trains groups in the order they finish, so its samples can be shorter on average than
        # sync's (which trains every group it generated): trained tokens are reported next to samples
        tokens = sum(r["mean_tokens"] * r["samples"] for r in rows)
        res[mode] = {"wall_s": last["wall_s"], "samples": last["trained_total"], "idle_ratio": last["idle_ratio"],
                     "tokens": round(tokens),
                     "rewards": [r["reward_by_task"].get("plus", 0.0) for r in rows], "versions_behind": [r["versions_behind_mean"] for r in rows],
                     "mean_tokens": round(sum(r["mean_tokens"] for r in rows) / len(rows), 1)}
        print(f"{mode:5s}: {last['trained_total']} samples in {last['wall_s']:.1f}s  idle ratio {last['idle_ratio']:.2f}"
              f"  mean rollout {res[mode]['mean_tokens']} tokens  plus reward {res[mode]['rewards'][0]:.3f} -> "
              f"{res[mode]['rewards'][-1]:.3f}")
    a, s = res["async"], res["sync"]
    per = 1000.0  # seconds per 1000 trained samples: equal sample counts make this plain wall time
    ours, base = a["wall_s"] * per / a["samples"], s["wall_s"] * per / s["samples"]
    k = max(1, len(a["rewards"]) // 4)
    early, late = sum(a["rewards"][:k]) / k, sum(a["rewards"][-k:]) / k
    tok_ours, tok_base = a["wall_s"] * per / a["tokens"], s["wall_s"] * per / s["tokens"]
    print(f"idle ratio: async {a['idle_ratio']:.2f}, sync {s['idle_ratio']:.2f}")
    print(f"per trained token: async {tok_ours:.2f} s, sync {tok_base:.2f} s per 1000 tokens "
          f"({tok_base / tok_ours:.2f}x; mean tokens per sample async {a['mean_tokens']}, sync {s['mean_tokens']})")
    print(f"async reward on plus, first {k} updates {early:.3f} -> last {k} updates {late:.3f}")
    inputs = {**vars(args), "tasks": "plus (1-digit shift, reward tracked) + long (shift, digits ~ lognormal), ratio plus_ratio:1", "model": "configs/rl_async_tiny.yaml",
              "warm_start": "training.rl.stages.runner SFT, 20 steps on plus", "samples": {"async": a["samples"], "sync": s["samples"]},
              "trained_tokens": {"async": a["tokens"], "sync": s["tokens"]}}
    write(__file__,
          Result("rl async vs sync wall time", ours, base, "s / 1000 trained samples", goal=1.5,
                 higher_is_better=False, ours_label="asynchronous (buffer threshold, push every update)",
                 baseline_label="synchronous (generate a batch, then train)",
                 extra={"idle_ratio_async": a["idle_ratio"], "idle_ratio_sync": s["idle_ratio"],
                        "reward_async": a["rewards"], "reward_sync": s["rewards"],
                        "versions_behind_async": a["versions_behind"]}),
          inputs,
          [Result("rl async vs sync wall time per trained token", tok_ours, tok_base, "s / 1000 trained tokens",
                  higher_is_better=False, ours_label="asynchronous", baseline_label="synchronous"),
           Result("rl async trainer busy ratio", 1 - a["idle_ratio"], 1 - s["idle_ratio"], "share of wall time",
                  ours_label="async trainer", baseline_label="sync trainer"),
           Result("rl async reward late vs early", late, early, "mean reward", ours_label=f"last {k} updates",
                  baseline_label=f"first {k} updates")])  # fmt: skip


if __name__ == "__main__":
    main()
