"""CPU demonstration: ``python -m training.rl demo --out OUT`` (``make rl-demo``).

Runs the stages of ``configs/rl_stages_demo.yaml`` (SFT -> RL on task A -> RL on task
B -> on-policy distillation) and writes ``OUT/curves.json`` (reward per step per stage, per
task), ``OUT/curves.png`` and a summary: A's reward after RL on A, after RL on B, after
distillation, and the share of the loss distillation recovered. Task A is the first RL stage's
first task, B the second RL stage's. Re-running with the same ``--out`` resumes at the next
stage boundary. A measured script, not a test: numbers vary with the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from core.io import atomic_write_text
from training.rl import CONFIGS
from training.rl.stages.runner import StageRunner, curves_of, load_stages_config


def _end(points: list[dict], task: str, last: int = 3) -> float:
    """A stage's final reward on ``task``: mean of its last ``last`` evaluations (less noise)."""
    vals = [p["reward"][task] for p in points[-last:]]
    return sum(vals) / len(vals)


def summarize(curves: dict[str, Any]) -> dict[str, Any]:
    stages = curves["stages"]
    rl = [s for s in stages if s["kind"] == "rl"]
    dist = [s for s in stages if s["kind"] == "distill"]
    if len(rl) < 2 or not dist:
        return {}
    a, b = rl[0]["task"], rl[1]["task"]
    start = rl[0]["points"][0]["reward"][a]
    after_a, after_b, after_d = _end(rl[0]["points"], a), _end(rl[1]["points"], a), _end(dist[-1]["points"], a)
    lost = after_a - after_b
    return {
        "task_a": a,
        "task_b": b,
        "a_before_rl": round(start, 4),
        "a_after_rl_a": round(after_a, 4),
        "a_after_rl_b": round(after_b, 4),
        "a_after_distill": round(after_d, 4),
        "b_after_rl_b": round(_end(rl[1]["points"], b), 4),
        "b_after_distill": round(_end(dist[-1]["points"], b), 4),
        "recovered_fraction": round((after_d - after_b) / lost, 3) if lost > 0 else None,
    }


def plot(curves: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({t for s in curves["stages"] for p in s["points"] for t in p["reward"]})
    summary = curves.get("summary") or {}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = dict(zip(tasks, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for s in curves["stages"]:
        xs = [p["global_step"] for p in s["points"]]
        ax.axvline(xs[0], color="0.85", lw=1)
        ax.text(xs[0], 1.02, s["name"], fontsize=8, transform=ax.get_xaxis_transform())
        for t in tasks:
            role = {summary.get("task_a"): " (task A)", summary.get("task_b"): " (task B)"}.get(t, "")
            label = t + role if s is curves["stages"][0] else None
            ax.plot(xs, [p["reward"][t] for p in s["points"]], color=colors[t], label=label)
    ax.set_xlabel("step (all stages)")
    ax.set_ylabel("eval reward")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


app = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])


@app.command()
@user_errors
def main(
    out: Path = typer.Option(Path("out/rl_demo"), help="output directory (curves.json, curves.png, checkpoints)"),
    config: Path = typer.Option(CONFIGS / "rl_stages_demo.yaml", help="stages YAML"),
    override: list[str] = typer.Option([], "--set", help="override a config key, e.g. --set rollout.group_size=4"),
) -> None:
    cfg = load_stages_config(config, override)
    state = StageRunner(cfg, out).run()
    curves = curves_of(state)
    for s, spec in zip(curves["stages"], cfg.stages, strict=True):
        s["task"] = next(iter(spec.tasks))
        s["tasks"] = spec.tasks
    curves["summary"] = summarize(curves)
    atomic_write_text(out / "curves.json", json.dumps(curves, indent=1))
    plot(curves, out / "curves.png")
    tasks = list(cfg.tasks)
    typer.echo("\nreward per evaluation (stage: step -> " + ", ".join(tasks) + ")")
    for s in curves["stages"]:
        row = "  ".join(f"{p['step']}:" + "/".join(f"{p['reward'][t]:.2f}" for t in tasks) for p in s["points"])
        typer.echo(f"  {s['name']:<10} {row}")
    typer.echo(f"summary: {json.dumps(curves['summary'])}")
    typer.echo(f"wrote {out / 'curves.json'} and {out / 'curves.png'}")


if __name__ == "__main__":
    app()
