"""One trial = build the environment, start it, run an agent, verify; a job = many trials.

Verification uploads the step's ``tests/`` to ``/tests`` only now (never baked into the image)
and runs ``test.sh`` under ``[verifier]`` limits and env, in the agent's container or, in Harbor's
separate mode, in a container of its own with the declared artifacts (``verifier.py``). The reward is read from
``/logs/verifier/reward.json`` (its ``reward`` field, or the mean of its numeric fields) or
``reward.txt``; an empty, missing or non-numeric reward is an error of the trial, never 0.
Multi-step tasks run their steps in order in one environment; the trial's reward is the mean
of the steps' rewards (each kept in ``result.json``).

Output, as Harbor's job layout: ``OUT/<trial>/result.json``, ``OUT/<trial>/agent/trajectory.json``
(+ agent logs), ``OUT/<trial>/verifier/{reward.txt,test-stdout.txt}``, ``OUT/<trial>/artifacts/`` (a
separate verifier's), and ``OUT/result.json``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.io import atomic_write_text
from swe_envs.images import slug
from swe_envs.terminal.config import TerminalConfig
from swe_envs.terminal.convert import convert_task, is_tb_task
from swe_envs.terminal.isolation import isolation_decision
from swe_envs.terminal.task import HarborTask, TaskFormatError, load_task
from swe_envs.terminal.verifier import score_step, separate_verifier, verifier_task


class Context:
    """What trials share: the Docker client, the image builder (content-hash cache), substitutes."""

    def __init__(self, cfg: TerminalConfig, log: Callable[[str], None] = print, client=None):
        """``client``: the Docker engine to build and run on (default: this process's own engine)."""
        from swe_envs.config import BuildConfig
        from swe_envs.docker_setup import docker_client
        from swe_envs.images import Images
        from swe_envs.registry import host_access
        from swe_envs.terminal.substitute import Substituter

        self.cfg, self.log = cfg, log
        self.client = client or docker_client(timeout=600)
        access = host_access(None)
        build = BuildConfig(timeout_s=cfg.images.build_timeout_s, memory_mb=cfg.images.build_memory_mb)
        self.images = Images(self.client, build, access=access, log=log)
        self.subst = Substituter(self.images, cfg.images, access.dockerfile_lines(), access.context())
        self._build_locks: dict[str, threading.Lock] = {}
        self._builds = threading.Semaphore(cfg.images.build_concurrency)
        self._guard = threading.Lock()

    def build(self, task: HarborTask):
        from swe_envs.terminal.environment import build_task_images

        with self._guard:
            lock = self._build_locks.setdefault(str(task.path), threading.Lock())
        with lock, self._builds:
            return build_task_images(task, self.images, self.subst)


def as_harbor(path: Path, scratch: Path) -> HarborTask:
    """Load a Harbor task, converting an old Terminal-Bench one into ``scratch`` first."""
    if is_tb_task(path):
        dest = scratch / slug(f"{path.resolve().parent.name}/{path.name}")
        if not dest.exists():
            convert_task(path, dest)
        return load_task(dest)
    return load_task(path)


@dataclass
class TrialSpec:
    task: HarborTask
    agent: str
    name: str


def run_trial(ctx: Context, spec: TrialSpec, out: Path) -> dict:
    from swe_envs.terminal.agents import run_llm, run_nop, run_oracle, run_stub
    from swe_envs.terminal.environment import Environment

    task, cfg = spec.task, ctx.cfg
    tdir = out / spec.name
    shutil.rmtree(tdir, ignore_errors=True)
    (tdir / "agent").mkdir(parents=True)
    from swe_envs.terminal.environment import network_decision

    result = {"trial": spec.name, "task": task.name, "task_path": str(task.path), "agent": spec.agent,
              "reward": None, "rewards": {}, "steps": [], "error": None, "agent_error": None, "timings": {},
              "network": network_decision(task, cfg.runner),
              "isolation": isolation_decision(task.config.agent.user, cfg.runner)}
    t0 = time.monotonic()
    try:
        built = ctx.build(task)
    except TaskFormatError as err:  # e.g. a compose key the runner does not support
        from swe_envs.terminal.environment import Built

        built = Built(False, error=str(err))
    result["timings"]["build_s"] = round(built.seconds, 2)
    result["built"] = built.ok
    result["substitutions"] = built.substitutions
    result["build_network"] = built.network
    result["images"] = built.images
    if built.ok:  # a separate verifier's environment too, before any agent runs (a build failure is the task's)
        for step in task.steps:
            sv = separate_verifier(task, step)
            vb = ctx.build(verifier_task(task, step, sv)) if sv is not None else None
            if vb is not None and not vb.ok:
                built = vb.__class__(False, log=built.log + vb.log, seconds=built.seconds + vb.seconds,
                                     error=f"verifier environment of step {step.name}: {vb.error}")
                break
    if not built.ok:
        (tdir / "build.log").write_text(built.log, encoding="utf-8")
        result["error"] = f"build: {built.error}"
        return _finish(tdir, result, [])
    env = None
    messages: list[dict] = []
    try:
        env = Environment(ctx.client, task, built, cfg.runner)
        agent_timeout = min(task.config.agent.timeout_sec * cfg.runner.timeout_multiplier,
                            cfg.runner.agent_timeout_max_s)
        rewards = []
        for i, step in enumerate(task.steps):
            ta = time.monotonic()
            if spec.agent == "oracle":
                run = run_oracle(env, step, agent_timeout, task.config.solution.env)
            elif spec.agent == "nop":
                run = run_nop(env, step)
            elif spec.agent == "stub":
                run = run_stub(env, step)
            else:
                run = run_llm(env, step, agent_timeout, cfg.agent, history=messages or None)
            messages = run.messages if spec.agent == "llm" else messages + run.messages
            if run.log:
                (tdir / "agent" / f"{spec.agent}{'' if len(task.steps) == 1 else '-' + step.name}.txt").write_text(
                    run.log, encoding="utf-8")
            if run.error:
                result["agent_error"] = run.error
            tv = time.monotonic()
            sub = "" if len(task.steps) == 1 else step.name
            value, fields, why, how = score_step(ctx, env, step, task, tdir / "verifier" / sub, tdir / "artifacts" / sub)
            result["steps"].append({"step": step.name, "reward": value, "rewards": fields, "error": why or None,
                                    "agent_s": round(tv - ta, 2), "verify_s": round(time.monotonic() - tv, 2),
                                    "verifier": how})
            if why:
                result["error"] = f"verifier{'' if len(task.steps) == 1 else ' (' + step.name + ')'}: {why}"
                break
            rewards.append(value)
            if i == 0:
                result["rewards"] = fields
        if result["error"] is None:
            result["reward"] = sum(rewards) / len(rewards)
            if len(task.steps) > 1:
                result["rewards"] = {s["step"]: s["reward"] for s in result["steps"]}
    except TaskFormatError as err:
        result["error"] = f"environment: {err}"
    except Exception as err:  # docker API errors, a dead container: this trial fails, the job goes on
        result["error"] = f"environment: {type(err).__name__}: {str(err)[:500]}"
    finally:
        if env is not None:
            env.close()
    result["timings"]["total_s"] = round(time.monotonic() - t0, 2)
    return _finish(tdir, result, messages)


def _finish(tdir: Path, result: dict, messages: list[dict]) -> dict:
    atomic_write_text(tdir / "agent" / "trajectory.json", json.dumps(messages, indent=1, ensure_ascii=False))
    atomic_write_text(tdir / "result.json", json.dumps(result, indent=1))
    return result


def summarize(results: list[dict]) -> dict:
    scored = [r["reward"] for r in results if r["reward"] is not None]
    return {"n_trials": len(results), "n_errors": sum(r["error"] is not None for r in results),
            "mean_reward": (sum(scored) / len(scored)) if scored else None,
            "trials": [{k: r[k] for k in ("trial", "task", "agent", "reward", "error")} for r in results]}


def run_trials(tasks: list[Path], agents: list[str], out: Path, cfg: TerminalConfig,
               log: Callable[[str], None] = print) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(cfg, log)
    results = []
    with tempfile.TemporaryDirectory(prefix="terminal-convert-") as scratch:
        for path in tasks:
            task = as_harbor(Path(path), Path(scratch))
            for agent in agents:
                name = f"{slug(task.name)}__{agent}"
                log(f"trial {name}")
                r = run_trial(ctx, TrialSpec(task, agent, name), out)
                log(f"  reward {r['reward']}" + (f"  error: {r['error']}" if r["error"] else ""))
                results.append(r)
    summary = summarize(results)
    atomic_write_text(out / "result.json", json.dumps(summary, indent=1))
    return summary
