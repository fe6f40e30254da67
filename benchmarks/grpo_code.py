"""GRPO on code tasks with their tests run in the sandbox, on a real model (issue 29 part 3):
SmolLM2-135M-Instruct as shipped, ``configs/rl_code_smollm2.yaml`` — EvoEval's Python problems
from the Terminal-Bench seeds (``../shared/terminal-seeds``), each reply's code block graded by its
task's own tests in a fresh container of the task (``training.rl.tasks.code``). Held-out accuracy
(greedy, the 16 held-out tasks, never trained on) before and after, one run per seed (``--seeds``),
with the spread.

It starts from the shipped model, not from ``make post-train-real``'s SFT checkpoint: that SFT data
holds the seeds' oracle solutions as tool calls, so the held-out tasks would not be unseen.

Writes ``OUT/summary.json`` and ``out/bench/grpo_code.json`` (held-out accuracy after vs before, mean
over seeds). Needs Docker (``python -m swe_envs setup-docker``); ~10 min a seed on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script or imported by the tests alike

from benchmarks._report import Result, write, write_status  # noqa: E402
from core.config import load_yaml, validate_config  # noqa: E402
from core.io import atomic_write_text  # noqa: E402
from training.rl.stages.config import StagesConfig  # noqa: E402
from training.rl.stages.runner import StageRunner  # noqa: E402

CONFIG = ROOT / "configs" / "rl_code_smollm2.yaml"


def run_seed(out: Path, seed: int, steps: int | None, task_overrides: dict, log) -> dict:
    data = load_yaml(CONFIG) | {"seed": seed}
    data["tasks"]["code"] |= task_overrides
    if steps:
        data["stages"] = [s | {"steps": steps} for s in data["stages"]]
    cfg = validate_config(StagesConfig, data, source=CONFIG.name)
    with StageRunner(cfg, out, log=log) as runner:
        state = runner.run()
        heldout = runner.tasks["code"].heldout_names
    curve = state["completed"][0]["curve"]
    points = [p for p in curve if "reward" in p]  # the held-out evaluations (start and end)
    first, last = points[0], points[-1]
    shutil.rmtree(out / "stages", ignore_errors=True)  # the checkpoint (~0.5 GB): the figures are the product
    return {"accuracy_before": first["accuracy"]["code"], "accuracy_after": last["accuracy"]["code"],
            "train_reward": [p["train_reward"] for p in curve if "train_reward" in p], "steps": last["step"],
            "heldout_tasks": heldout, "seconds": state["completed"][0]["seconds"]}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "grpo_code")
    ap.add_argument("--seeds", type=int, default=3, help="runs (seeds 0..N-1)")
    ap.add_argument("--steps", type=int, default=None, help="default: the config's")
    ap.add_argument("--tasks", default=None, help="EvoEval task tree (default: the config's, in the cache)")
    ap.add_argument("--heldout", type=int, default=None, help="held-out tasks (default: the config's)")
    ap.add_argument("--fresh", action="store_true", help="remove OUT first instead of reusing finished seeds")
    args = ap.parse_args(argv)
    overrides = {k: v for k, v in (("tasks", args.tasks), ("heldout", args.heldout)) if v is not None}
    args.out = args.out.resolve()
    if args.fresh:
        shutil.rmtree(args.out, ignore_errors=True)
    from samples.post_train import SHARED_SEEDS as seeds_dir
    from swe_envs.docker_setup import docker_ok
    from swe_envs.terminal.seeds import extract_seeds
    engine, reason = docker_ok()
    if not engine or not any(seeds_dir.glob("*.tgz")):
        why = f"no Docker engine: {reason}" if not engine else f"no seed archives at {seeds_dir}"
        write_status(__file__, "skipped", why)
        print(f"grpo_code: skipped: {why}")
        return
    extract_seeds(seeds_dir)

    def log(msg: str) -> None:
        print(msg, flush=True)

    t0, runs = time.monotonic(), {}
    for seed in range(args.seeds):
        done = args.out / f"seed-{seed}.json"
        if done.is_file():
            runs[seed] = json.loads(done.read_text())
            continue
        log(f"GRPO on code, seed {seed}")
        runs[seed] = run_seed(args.out / f"seed-{seed}", seed, args.steps, overrides, log)
        atomic_write_text(done, json.dumps(runs[seed], indent=1))
    before = [r["accuracy_before"] for r in runs.values()]
    after = [r["accuracy_after"] for r in runs.values()]
    gains = [a - b for a, b in zip(after, before, strict=True)]
    summary = {"model": "SmolLM2-135M-Instruct (as shipped)", "config": str(CONFIG.relative_to(ROOT)),
               "accuracy_before": before, "accuracy_after": after,
               "accuracy_gain_min_max": [round(min(gains), 4), round(max(gains), 4)],
               "runs": runs, "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("accuracy_before", "accuracy_after")}))
    headline = Result("grpo_code", statistics.mean(after), statistics.mean(before), "held-out accuracy (EvoEval)",
                      ours_label="SmolLM2 after GRPO on EvoEval", baseline_label="SmolLM2-135M-Instruct as shipped",
                      notes=f"mean of {len(runs)} seeds; gain min/max {summary['accuracy_gain_min_max']}; "
                            f"{len(runs[0]['heldout_tasks'])} held-out tasks")
    write(__file__, headline, {"summary": str(args.out / "summary.json"), "seeds": sorted(runs)})


if __name__ == "__main__":
    main()
