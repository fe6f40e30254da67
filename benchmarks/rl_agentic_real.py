"""Issue 30 part 5 on real tasks: known-good and do-nothing tool sequences, then a real model in the loop.

Tasks (none written by this project): real SWE-bench Verified instances from ../shared/swe-real
(``--swe``, default a flask and a pytest instance; their environments are built on demand with the
shipped defaults) and converted Terminal-Bench seeds from ../shared/terminal-seeds (``--terminal``,
default EvoEval's task 0 and Aider-polyglot exercises in Python and C++), converted with
``swe_envs terminal convert``.

1. **Policies through sessions** (``python -m swe_envs session run``): ``gold`` replays each
   instance's reference patch or each task's ``solution/`` through the editor and bash tools, ``nop``
   submits at once. Headline: the share of tasks where gold scores 1 and nop 0 (goal: all).
2. **A real model in the loop**: configs/rl_agentic_smollm2.yaml (SmolLM2-135M-Instruct as shipped, its
   own chat template, multi-turn tool calls executed in the sessions, the verifier's reward), its task
   services pointed at the same tasks, ``--updates`` updates per mode (``--modes``, default async then
   sync), every buffered episode saved. Reported as measured: rewards (a 135M model is expected to score
   ~0), tool calls, turns, the ledger, the trainer's idle share and wall time per trained sample.

Writes out/bench/rl_agentic_real.json. Run: ``python benchmarks/rl_agentic_real.py [--updates 2]``
(first run: the pytest and C++ environments build, ~10-20 min on 2 cores; then ~10 min per mode).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks._report import OUT_DIR, Result, write  # noqa: E402
from benchmarks.rl_agentic import run_summary  # noqa: E402
from core.cli import load_cli_config  # noqa: E402

WORK = OUT_DIR / "rl_agentic_real"
CONFIG = ROOT / "configs" / "rl_agentic_smollm2.yaml"
SHARED = ROOT.parent / "shared"
SWE = "pallets__flask-5014,pytest-dev__pytest-7432"
TERMINAL = "evoeval/0,aider_polyglot/polyglot_python_affine-cipher,aider_polyglot/polyglot_cpp_allergies"


def inputs(swe_real: Path, seeds: Path, swe_ids: list[str], seed_names: list[str]) -> dict[str, Path]:
    """The selected SWE rows as one JSONL, and the selected seeds converted to Harbor tasks."""
    rows = [json.loads(line) for f in sorted(swe_real.glob("*.jsonl")) for line in f.read_text().splitlines()]
    picked = [r for r in rows if r["instance_id"] in swe_ids]
    missing = set(swe_ids) - {r["instance_id"] for r in picked}
    if missing:
        raise SystemExit(f"not in {swe_real}: {sorted(missing)}")
    WORK.mkdir(parents=True, exist_ok=True)
    instances = WORK / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in picked))
    from swe_envs.terminal.seeds import extract_seeds

    extracted = extract_seeds(seeds)
    harbor = WORK / "harbor"
    shutil.rmtree(harbor, ignore_errors=True)
    for name in seed_names:
        src = extracted / name
        if not src.is_dir():
            raise SystemExit(f"no seed {name} under {extracted}")
        subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "convert", "--input", str(src), "--output",
                        str(harbor / name.replace("/", "__"))], check=True, cwd=ROOT)
    return {"instances": instances, "repos": swe_real, "tasks": harbor}


def policies(paths: dict[str, Path]) -> dict[str, dict]:
    """gold and nop through ``session run`` on both sets: reward and tool calls per task, wall time."""
    where = {"swe": ["--instances", str(paths["instances"]), "--repos", str(paths["repos"])],
             "terminal": ["--tasks", str(paths["tasks"])]}
    res: dict[str, dict] = {}
    for policy in ("gold", "nop"):
        for kind, args in where.items():
            out = WORK / f"{policy}_{kind}"
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "swe_envs", "session", "run", *args, "--policy", policy,
                            "--output", str(out)], cwd=ROOT)
            took = time.monotonic() - t0
            if not (out / "trajectories.jsonl").is_file():
                raise SystemExit(f"session run --policy {policy} on the {kind} tasks wrote no trajectories ({out})")
            for row in map(json.loads, (out / "trajectories.jsonl").read_text().splitlines()):
                res.setdefault(str(row["id"]), {"kind": kind})[policy] = {
                    "reward": row.get("reward"), "turns": row.get("turns"), "error": row.get("error", "")}
            print(f"{policy} {kind}: {took:.0f}s", flush=True)
    return res


def gold_sft_rows(name: str = "gold_sft.jsonl") -> Path:
    """The gold episodes ``policies`` ran that scored 1, as SFT rows in WORK/NAME (``export-sft``);
    none scoring 1 is an error, never an empty SFT."""
    from training.rl.export import export

    kept = WORK / name
    counts = export([WORK / f"gold_{kind}" / "trajectories.jsonl" for kind in ("swe", "terminal")], kept, 1.0)
    if not counts["kept"]:
        raise SystemExit(f"no gold episode scored 1: {dict(counts)}")
    print(f"gold episodes kept for SFT: {dict(counts)}", flush=True)
    return kept


def task_arguments(ap: argparse.ArgumentParser) -> None:
    """The options naming the real tasks, for every benchmark that runs on them."""
    ap.add_argument("--swe", default=SWE, help="instance ids in ../shared/swe-real, comma-separated")
    ap.add_argument("--terminal", default=TERMINAL, help="seed dirs (SET/NAME) in ../shared/terminal-seeds' archives")
    ap.add_argument("--swe-real", type=Path, default=SHARED / "swe-real")
    ap.add_argument("--seeds", type=Path, default=SHARED / "terminal-seeds")


def rl(paths: dict[str, Path], updates: int, modes: list[str], overrides: list[str] = (),
       prefix: str = "rl", config: Path = CONFIG, task_args: dict | None = None) -> dict[str, dict]:
    """``config`` (configs/rl_agentic_smollm2.yaml) on the selected tasks (plus ``overrides``, and
    ``task_args`` in every task's arguments), each mode into WORK/PREFIX_MODE."""
    from training.rl.trainer.config import RLAsyncConfig
    from training.rl.trainer.run import run_training

    tasks = yaml.safe_load(config.read_text())["orchestrator"]["tasks"]
    for t in tasks:
        t["args"].update({"instances": str(paths["instances"]), "repos": str(paths["repos"])}
                         if t["kind"] == "swe" else {"tasks": str(paths["tasks"])})
        t["args"].update(task_args or {})
    res = {}
    for mode in modes:
        cfg = load_cli_config(RLAsyncConfig, config, [
            f"trainer.mode={mode}", f"trainer.updates={updates}", f"orchestrator.tasks={json.dumps(tasks)}",
            "orchestrator.save_rollouts=true", *overrides])
        out = WORK / f"{prefix}_{mode}"
        shutil.rmtree(out, ignore_errors=True)
        summary = run_training(cfg, out, log=lambda m: print(m, flush=True))
        res[mode] = run_summary(out, summary)
        print(f"{prefix} {mode}: {res[mode]}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    task_arguments(ap)
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--modes", default="async,sync", help="RL trainer modes to run, in order ('' for none)")
    args = ap.parse_args()
    paths = inputs(args.swe_real, args.seeds, args.swe.split(","), args.terminal.split(","))
    pol = policies(paths)
    both = [t for t, r in pol.items() if r.get("gold", {}).get("reward") == 1.0 and r.get("nop", {}).get("reward") == 0.0]
    print(f"gold 1 and nop 0: {len(both)}/{len(pol)} {pol}", flush=True)
    runs = rl(paths, args.updates, [m for m in args.modes.split(",") if m])
    inputs_ = {"config": "configs/rl_agentic_smollm2.yaml", "updates": args.updates, "swe": args.swe,
               "terminal": args.terminal, "policies": pol, "runs": runs}
    also = []
    for mode, r in runs.items():
        eps = r["episode_rewards"]
        gold = statistics.mean(r.get("gold", {}).get("reward") or 0.0 for r in pol.values())
        also.append(Result(f"rl_agentic_real_reward_{mode}", statistics.mean(eps) if eps else 0.0, gold,
                           "mean episode reward", ours_label=f"SmolLM2-135M-Instruct as shipped, {mode} RL",
                           baseline_label="the gold tool sequences on the same tasks",
                           extra={"episodes": r["episodes"], "tool_calls": r["tool_calls"],
                                  "ledger_ok": r["ledger_ok"]}))
    if {"async", "sync"} <= runs.keys():
        a, s = runs["async"], runs["sync"]
        also.append(Result("rl_agentic_real_idle", a["idle_ratio"], s["idle_ratio"], "trainer idle share of wall time",
                           higher_is_better=False, ours_label="async, SmolLM2 on the real tasks",
                           baseline_label="sync, the same"))
        also.append(Result("rl_agentic_real_wall_per_sample", a["wall_s"] / max(a["samples"], 1),
                           s["wall_s"] / max(s["samples"], 1), "s per trained sample", higher_is_better=False,
                           ours_label="async", baseline_label="sync"))
    write(__file__, Result("rl_agentic_real_policies", len(both), len(pol), "tasks with gold 1 and nop 0", goal=1.0,
                           ours_label="gold and nop tool sequences in sessions, real tasks",
                           baseline_label="every task"), inputs_, also)


if __name__ == "__main__":
    main()
