"""The stage runner: GLM-5's post-training stages in sequence, in this one process — SFT ->
reasoning RL -> agentic RL -> general RL -> on-policy cross-stage distillation — from one config
(``training.rl.stages.config``). Sampling, reward and update alternate here
(``training.rl.stages.episodes``); the asynchronous system (``training.rl.rollout``,
``training.rl.trainer``) runs the same update against rollout servers and task services instead.

The policy (``training.policy``) is our model from scratch on the toy tasks, or existing weights
— ``model: {hf: PATH}`` (any transformers causal LM) or ``{checkpoint: PATH}`` (ours or HF) — on
text tasks rendered with the policy's own chat template. The first stage starts from ``model``;
each later stage from the previous stage's final checkpoint (weights only: a fresh optimizer
per stage). A stage saves its final checkpoint under ``OUT/stages/<name>/`` (in the policy's own
format, tokenizer included) and, when it lists ``teacher_for``, registers that checkpoint as
the teacher of those task types; ``teachers:`` registers checkpoints from before the run (e.g.
the SFT checkpoint it starts from). ``OUT/pipeline.json`` records completed stages, their
checkpoints, the teacher registry and the reward curves, written atomically after each stage.

Resume is at stage boundaries and bit-exact (and refused where a completed stage was run with other
settings than the config's, recorded per stage): a stage's result depends only on its starting
checkpoint, its config and its seeds (sampling uses a generator seeded by (seed, stage
index); prompts come from a NumPy generator seeded the same way), and even an uninterrupted
run reloads each stage's start from the checkpoint on disk — so a run stopped after stage k
and started again produces the same bytes as one that never stopped. SFT stages run through
``training.trainer`` (same model, loader, checkpoints) on SFT shards with loss masks.

Rewards are measured on a fixed held-out prompt set per task after every ``eval.every``
steps; ``curves`` in pipeline.json holds them per stage and step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import typer

from core.cli import user_errors
from core.config import load_config
from core.errors import ConfigError
from core.io import atomic_write_text
from core.shards import TokenizerInfo
from training.checkpoint import latest_checkpoint
from training.model.config import ModelConfig
from training.optim.schedules import lr_at
from training.policy import Policy, PolicySource, as_policy, build_policy, load_codec, load_policy
from training.rl import CONFIGS
from training.rl.algo.distill import TeacherSet, kl_update
from training.rl.algo.update import batch_tensors, logprobs_of, policy_update, rl_advantages
from training.rl.stages.config import StagesConfig, StageSpec
from training.rl.stages.episodes import rollout
from training.rl.tasks.build import Task, build_tasks
from training.rl.tasks.toy import EOS, PAD, VOCAB
from training.rl.trajectory import Trajectory
from training.serving.sampler import SamplingParams
from training.sft.pack import write_sft_shards

STATE = "pipeline.json"


def _split(total: int, weights: dict[str, float]) -> dict[str, int]:
    """``total`` items over tasks by weight (largest remainders), every task at least one."""
    names = list(weights)
    w = np.array([weights[n] for n in names], dtype=float)
    raw = total * w / w.sum()
    counts = np.maximum(1, np.floor(raw).astype(int))
    for i in np.argsort(-(raw - np.floor(raw)))[: max(0, total - counts.sum())]:
        counts[i] += 1
    return dict(zip(names, counts.tolist(), strict=True))


class StageRunner:
    def __init__(self, cfg: StagesConfig, out: str | Path, log: Callable[[str], None] = print):
        self.cfg, self.out, self.log = cfg, Path(out), log
        if isinstance(cfg.model, ModelConfig):  # from scratch, on the toy vocabulary
            vocab = cfg.model.vocab_size or len(VOCAB)
            if vocab < len(VOCAB):
                raise ConfigError(f"model.vocab_size: {vocab} < the toy vocabulary's {len(VOCAB)}")
            self.source: ModelConfig | PolicySource = cfg.model.model_copy(update={"vocab_size": vocab}).check("model")
            codec = None
        else:  # existing weights: their tokenizer and chat template render the tasks
            self.source = cfg.model
            codec = load_codec(cfg.model.path)
        self.tasks = build_tasks(cfg.tasks, codec)
        # a task with its own held-out split (code) evaluates on it; generated tasks draw a fixed set
        self.eval_sets = {
            name: getattr(task, "heldout_problems", task.problems)(cfg.eval.prompts, np.random.default_rng([cfg.eval.seed, i]))
            for i, (name, task) in enumerate(self.tasks.items())
        }
        self.update_cfg = cfg.update.model_copy(update={"temperature": cfg.rollout.temperature})

    def close(self) -> None:
        """Release what tasks hold (the code task's session pool and its containers)."""
        for task in self.tasks.values():
            getattr(task, "close", lambda: None)()

    def __enter__(self) -> StageRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- state -----------------------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        path = self.out / STATE
        state = json.loads(path.read_text()) if path.is_file() else {"completed": [], "teachers": dict(self.cfg.teachers)}
        for done, spec in zip(state["completed"], self.cfg.stages, strict=False):
            if done["name"] != spec.name:
                raise ConfigError(
                    f"{path}: completed stage {done['name']!r} is not the config's stage {spec.name!r} "
                    "(use a new --out for changed stages)"
                )
            # a stage kept under its name but run with other settings is not this config's stage
            # (states from before the settings were recorded are taken by name)
            changed = sorted(k for k, v in self.settings(spec).items() if k in done.get("settings", {})
                             and done["settings"][k] != v)
            if changed:
                raise ConfigError(f"{path}: completed stage {spec.name!r} was run with other {', '.join(changed)} "
                                  "than the config's (use a new --out for changed stages)")
        return state

    def settings(self, spec: StageSpec) -> dict[str, Any]:
        """What a stage's result depends on besides its start: its own spec and the shared settings."""
        shared = self.cfg.model_dump(mode="json", exclude={"stages", "threads"})
        return {"stage": spec.model_dump(mode="json"), **shared}

    def save_state(self, state: dict[str, Any]) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out / STATE, json.dumps(state, indent=1))

    # -- evaluation ------------------------------------------------------------------------------
    def params(self, task: Task, temperature: float, top_p: float = 1.0) -> SamplingParams:
        return SamplingParams(temperature, top_p, self.cfg.rollout.max_tokens, task.stop_ids)

    def evaluate(self, model: Policy) -> tuple[dict[str, float], dict[str, float]]:
        """Mean reward and accuracy (share of fully right answers) per task on the held-out sets."""
        gen = torch.Generator().manual_seed(self.cfg.eval.seed)
        reward, accuracy = {}, {}
        for name, task in self.tasks.items():
            r = [t.reward for t in rollout(model, task, self.eval_sets[name], 1,
                                           self.params(task, self.cfg.eval.temperature), gen)]
            reward[name], accuracy[name] = round(float(np.mean(r)), 4), round(float(np.mean([x == 1.0 for x in r])), 4)
        return reward, accuracy

    def answer_nll(self, model: Policy, rows_per_pass: int = 64) -> dict[str, float]:
        """Per task with reference answers (``reference_reply``): the held-out set's mean negative
        log-likelihood per token of the reference answer after the prompt, teacher-forced — SFT's own
        loss on the task's held-out answers, with no greedy argmax between the weights and the figure."""
        out = {}
        for name, task in self.tasks.items():
            ref = getattr(task, "reference_reply", None)
            if ref is None:
                continue
            trajs = [Trajectory(str(i), name, str(i), list(p.prompt), (r := ref(p)), [1] * len(r), [0.0] * len(r))
                     for i, p in enumerate(self.eval_sets[name])]  # fmt: skip
            total, count = 0.0, 0
            for i in range(0, len(trajs), rows_per_pass):
                b = batch_tensors(trajs[i : i + rows_per_pass])
                total -= float((logprobs_of(model, b, 1.0) * b["mask"]).sum())
                count += int(b["mask"].sum())
            out[name] = round(total / max(count, 1), 4)
        return out

    # -- run ---------------------------------------------------------------------------------------
    def run(self, stop_after: int | None = None) -> dict[str, Any]:
        """Run the stages not yet completed (at most ``stop_after`` of them in this call)."""
        threads = torch.get_num_threads()
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        try:
            state = self.load_state()
            ran = 0
            for idx, spec in enumerate(self.cfg.stages):
                if idx < len(state["completed"]):
                    continue
                if stop_after is not None and ran >= stop_after:
                    break
                start = state["completed"][-1]["checkpoint"] if state["completed"] else None
                t0 = time.monotonic()
                self.log(f"── stage {idx + 1}/{len(self.cfg.stages)}: {spec.name} ({spec.kind}, {spec.steps} steps) ──")
                if spec.kind == "sft":
                    ckpt, curve = self.run_sft(idx, spec)
                else:
                    prior = state["completed"][-1]["curve"][-1] if state["completed"] else None
                    ckpt, curve = self.run_rl(idx, spec, start, state["teachers"], prior)
                state["completed"].append(
                    {"name": spec.name, "kind": spec.kind, "checkpoint": str(ckpt), "curve": curve,
                     "seconds": round(time.monotonic() - t0, 1), "settings": self.settings(spec)}
                )  # fmt: skip
                for task in spec.teacher_for:
                    state["teachers"][task] = str(ckpt)
                self.save_state(state)
                ran += 1
            return state
        finally:
            torch.set_num_threads(threads)

    def _model_from(self, checkpoint: str | None) -> Policy:
        """The previous stage's checkpoint, or (first stage) the config's model."""
        torch.manual_seed(self.cfg.seed)
        return build_policy(self.source, self.cfg.seed) if checkpoint is None else load_policy(checkpoint)

    def _eval_point(self, model: Policy, point: dict[str, Any]) -> dict[str, Any]:
        point["reward"], point["accuracy"] = self.evaluate(model)
        nll = self.answer_nll(model)
        if nll:
            point["answer_nll"] = nll
        return point

    def run_rl(self, idx: int, spec: StageSpec, start: str | None, teachers: dict[str, str],
               prior: dict[str, Any] | None = None) -> tuple[Path, list]:
        """``prior``: the previous stage's last curve point. Its evaluation is of the very weights this
        stage starts from (saved in full precision, greedy decoding, the same held-out sets and seed), so
        it is this stage's step 0 rather than a second identical evaluation."""
        cfg = self.cfg
        model = self._model_from(start)
        lr = spec.lr or cfg.optimizer.lr
        opt = model.optimizer(cfg.optimizer.model_copy(update={"lr": lr}))
        distill = spec.kind == "distill"
        teacher_set = None
        if distill:
            by_stage = {d["name"]: d["checkpoint"] for d in self.load_state()["completed"]}
            ckpts = {t: by_stage[s] for t, s in spec.teachers.items()}
            ckpts = {t: ckpts.get(t, teachers.get(t)) for t in spec.tasks}
            missing = [t for t, c in ckpts.items() if c is None]
            if missing:
                raise ConfigError(f"stage {spec.name}: no teacher registered for {missing}")
            teacher_set = TeacherSet(ckpts, model.vocab_size)
        ref = self._model_from(start).frozen() if cfg.update.loss.kl_coef > 0 else None
        group = 1 if distill else (spec.group_size or cfg.rollout.group_size)
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + idx)
        rng = np.random.default_rng([cfg.seed, idx])
        # distillation samples once per prompt: as many prompts as RL has samples per step
        per_task = _split(cfg.rollout.prompts_per_step * (cfg.rollout.group_size if distill else 1), spec.tasks)
        if prior and "reward" in prior:
            curve = [{"step": 0, **{k: prior[k] for k in ("reward", "accuracy", "answer_nll") if k in prior}}]
            self.log(f"  step 0  eval {curve[0]['reward']} (the previous stage's last evaluation)")
        else:
            curve = [self._eval_point(model, {"step": 0})]
            self.log(f"  step 0  eval {curve[0]['reward']}")
        for step in range(spec.steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, spec.steps, cfg.schedule, lr)
            trajs: list[Trajectory] = []
            for name, n in per_task.items():  # groups stay contiguous: advantages are per group
                task = self.tasks[name]
                params = self.params(task, cfg.rollout.temperature, cfg.rollout.top_p)
                trajs += rollout(model, task, task.problems(n, rng), group, params, gen, weight_version=step)
            if distill and spec.distill_loss != "sampled_token":
                full = teacher_set.distributions(trajs, self.update_cfg.temperature)
                stats = kl_update(model, opt, trajs, full, self.update_cfg, spec.distill_loss.split("_")[0])
            elif distill:
                teacher_logp = teacher_set.logprobs(trajs, self.update_cfg.temperature)
                stats = policy_update(model, opt, trajs, None, self.update_cfg, ref, teacher_logp=teacher_logp)
            else:
                adv = rl_advantages(trajs, group, cfg.update.loss)
                stats = policy_update(model, opt, trajs, adv, self.update_cfg, ref)
            point: dict[str, Any] = {
                "step": step + 1,
                "train_reward": round(float(np.mean([t.reward for t in trajs])), 4),
                **{k: round(v, 5) for k, v in stats.items()},
            }
            if (step + 1) % cfg.eval.every == 0 or step + 1 == spec.steps:
                self._eval_point(model, point)
            curve.append(point)
            self.log(
                f"  step {step + 1:3d}  train reward {point['train_reward']:.3f}  loss {stats['loss']:+.4f}"
                + (f"  eval {point['reward']}" if "reward" in point else "")
            )
        ckpt = model.save(self.out / "stages" / spec.name, spec.steps, opt, {"stage": spec.name})
        return ckpt, curve

    def run_sft(self, idx: int, spec: StageSpec) -> tuple[Path, list]:
        from training.train_config import TrainerConfig
        from training.trainer import train

        cfg, sft = self.cfg, self.cfg.sft
        stage_dir = self.out / "stages" / spec.name
        rng = np.random.default_rng([cfg.seed, idx])
        samples = []
        for name, n in _split(sft.examples, spec.tasks).items():
            task = self.tasks[name]
            samples += [(*task.reference(p), name) for p in task.problems(n, rng)]
        info = TokenizerInfo(id="toy-vocab", vocab_size=len(VOCAB), eos_id=EOS)
        write_sft_shards(samples, stage_dir / "shards", info, sft.seq_len, PAD, stage=spec.name)
        tcfg = TrainerConfig.model_validate(
            {
                "seed": cfg.seed, "steps": spec.steps, "threads": cfg.threads,
                "loader": {"batch_size": sft.batch_size, "seed": cfg.seed},
                "model": self.source.model_dump(),
                "optimizer": cfg.optimizer.model_copy(update={"lr": spec.lr or cfg.optimizer.lr}).model_dump(),
                "schedule": sft.schedule.model_dump(),
                "checkpoint": {"dir": str(stage_dir / "trainer")},
            }
        )  # fmt: skip
        curve = [self._eval_point(self._model_from(None), {"step": 0})]
        done = 0
        while done < spec.steps:  # the trainer resumes from its own checkpoints between evaluations
            chunk = min(cfg.eval.every, spec.steps - done)
            result = train(tcfg, stage_dir / "shards", stop_after=chunk, log=lambda _msg: None)
            done = result.step
            point = self._eval_point(as_policy(result.model), {"step": done, "loss": result.metrics[-1]["loss"]})
            curve.append(point)
            self.log(f"  step {done:3d}  sft loss {point['loss']:.4f}  eval {point['reward']}")
        return latest_checkpoint(stage_dir / "trainer"), curve


def curves_of(state: dict[str, Any]) -> dict[str, Any]:
    """Reward per step per stage (the demo's curves.json)."""
    stages, offset = [], 0
    for d in state["completed"]:
        points = [
            {"step": p["step"], "global_step": offset + p["step"], "reward": p["reward"],
             **{k: p[k] for k in ("accuracy", "train_reward") if k in p}}
            for p in d["curve"] if "reward" in p
        ]  # fmt: skip
        stages.append({"name": d["name"], "kind": d["kind"], "points": points})
        offset += d["curve"][-1]["step"]
    return {"stages": stages, "teachers": state["teachers"]}


def load_stages_config(path: str | Path, overrides: list[str] | None = None) -> StagesConfig:
    return load_config(StagesConfig, path, overrides)


app = typer.Typer(add_completion=False, help="Run post-training stages (SFT -> RL -> distillation) in sequence from a config.")


@app.command()
@user_errors
def main(
    config: Path = typer.Option(CONFIGS / "rl_stages_tiny.yaml", help="stages YAML"),
    out: Path = typer.Option(Path("out/rl_stages"), help="output directory (re-run to resume at the next stage)"),
    stop_after: int = typer.Option(None, help="run at most this many stages in this call"),
    override: list[str] = typer.Option([], "--set", help="override a config key, e.g. --set rollout.group_size=4"),
) -> None:
    cfg = load_stages_config(config, override)
    with StageRunner(cfg, out) as runner:
        state = runner.run(stop_after)
    atomic_write_text(out / "curves.json", json.dumps(curves_of(state), indent=1))
    typer.echo(f"{len(state['completed'])}/{len(cfg.stages)} stages done; curves: {out / 'curves.json'}")


if __name__ == "__main__":
    app()
