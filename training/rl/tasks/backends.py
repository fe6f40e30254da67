"""What each task service serves: instances to roll out, and the reward of a finished trajectory.

A backend has ``instance(seed) -> dict`` (``id``, prompt ``messages`` — or ``prompt_ids`` for a
token-level task —, optional ``max_tokens``, ``max_turns``, ``stop_token_ids``; the dict travels
back with every request, so a service replica that never saw it can serve it), optionally
``step(instance, turns) -> observation ids | None`` (multi-turn tasks), and
``reward(instance, messages, turns) -> (float, info)``. Rewards come from the project's real graders
and harnesses, never from the service itself:

* ``toy``      — ``training.rl.tasks.toy`` (copy/sort/reverse/lookup, programmatic reward, token-level)
* ``search``   — deep-search tasks from ``python -m synth.search generate``, ``synth.search.grade.score``
* ``swe``      — SWE instances (validate's output, or SWE-bench JSONL with ``repos``); the reply's
                 diff is evaluated by ``python -m swe_envs evaluate``
                 (reward 1 = in ``resolved_ids``; 0 = unresolved, empty or a patch that is malformed
                 or does not apply; an environment/harness error is no reward at all)
* ``terminal`` — Harbor tasks; the reply's shell script runs as the task's solution through
                 ``python -m swe_envs terminal run --agent oracle`` (reward = the verifier's reward)

A harness that cannot produce a reward (no docker, a crash) raises ``RewardUnavailable``: the
service answers 503 and the orchestrator retries or drops the trajectory with a reason — an
unavailable reward is never scored 0.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from core.errors import ConfigError, InputError
from core.io import read_jsonl, write_jsonl_atomic


class RewardUnavailable(RuntimeError):
    pass


def _last_text(messages: list[dict]) -> str:
    last = messages[-1] if messages else {}
    if not isinstance(last, dict) or last.get("role") != "assistant":
        raise ValueError("the last message must be the assistant's reply")
    return str(last.get("content") or "")


def _read_jsonl(path: str | Path, what: str) -> list[dict]:
    rows = read_jsonl(path, what)
    if not rows:
        raise InputError(f"{what} is empty: {path}")
    return rows


def _harness(cmd: list[str], timeout_s: float, cwd: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise RewardUnavailable(f"{' '.join(cmd[:4])} timed out after {timeout_s}s") from None


class ToyBackend:
    """``training.rl.tasks.toy`` served token-level: the instance carries ``prompt_ids`` in the
    toy vocabulary, rewards are computed from the model's turns (token ids), and the ``lookup``
    task's tool observations come from ``step``. ``lengths`` (heavy-tailed workloads): each
    instance's problem size (``digits``, so its answer and rollout length) is drawn from a
    lognormal ``{"median", "sigma", "max"}`` — a few problems are many times longer than most, as
    agent rollouts are; ``ignore_eos`` makes every rollout run to its full budget."""

    def __init__(self, kind: str = "copy", max_tokens: int | None = None, lengths: dict | None = None,
                 ignore_eos: bool = False, **task: Any):
        from training.rl.tasks.toy import ToyTaskConfig

        self.cfg = ToyTaskConfig(kind=kind, **task)  # digits, offset, marker, seed: the toy task's own
        self.max_tokens, self.lengths, self.ignore_eos = max_tokens, lengths, ignore_eos
        self._tasks: dict[int, Any] = {}

    def _digits(self, seed: int) -> int:
        if not self.lengths:
            return self.cfg.digits
        n = random.Random(seed).lognormvariate(math.log(self.lengths.get("median", 4)), self.lengths.get("sigma", 1.0))
        return max(1, min(int(round(n)), int(self.lengths.get("max", 32))))

    def _problem(self, seed: int):
        import numpy as np

        from training.rl.tasks.toy import ToyTask

        d = self._digits(seed)
        if d not in self._tasks:
            self._tasks[d] = ToyTask(self.cfg.kind, self.cfg.model_copy(update={"digits": d}))
        task = self._tasks[d]
        return task, task.problems(1, np.random.default_rng([seed, 11]))[0]

    def instance(self, seed: int) -> dict:
        from training.rl.tasks.toy import STOP_TOKENS, decode

        task, p = self._problem(seed)
        return {"id": f"{self.cfg.kind}-{seed}", "seed": seed, "prompt_ids": p.prompt,
                "messages": [{"role": "user", "content": decode(p.prompt)}], "max_turns": task.max_turns,
                # ignore_eos (SGLang/vLLM's name): every rollout runs to its budget, answer + 1
                "stop_token_ids": [] if self.ignore_eos else STOP_TOKENS,
                "max_tokens": self.max_tokens or (len(p.answer) + 1 if self.ignore_eos else 2 * len(p.answer) + 4)}

    def step(self, instance: dict, turns: list[list[int]]) -> list[int] | None:
        task, p = self._problem(int(instance["seed"]))
        return task.observe(p, turns[-1])

    def reward(self, instance: dict, messages: list[dict], turns: list[list[int]] | None = None) -> tuple[float, dict]:
        if not turns:
            raise ValueError("toy tasks are graded on the model's turns (token ids)")
        task, p = self._problem(int(instance["seed"]))
        return float(task.reward(p, turns)), {"digits": len(p.answer)}


def toy_tokenizer():
    """A word-level ``tokenizers`` tokenizer whose ids are the toy vocabulary's own, so the
    rollout server and the orchestrator decode toy tokens like any other model's."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from training.rl.tasks.toy import VOCAB

    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


class SearchBackend:
    def __init__(self, tasks: str, max_tokens: int | None = None):
        self.tasks = _read_jsonl(tasks, "search tasks")
        for n, t in enumerate(self.tasks, 1):
            if not isinstance(t.get("question"), str) or not isinstance(t.get("answer"), str):
                raise InputError(f"{tasks}:{n}: a search task needs string 'question' and 'answer'")
        self.max_tokens = max_tokens

    def instance(self, seed: int) -> dict:
        t = self.tasks[seed % len(self.tasks)]
        out = {"id": str(t.get("id", seed % len(self.tasks))), "index": seed % len(self.tasks),
               "messages": [{"role": "user", "content": t["question"]}]}
        if self.max_tokens:
            out["max_tokens"] = self.max_tokens
        return out

    def reward(self, instance: dict, messages: list[dict], turns=None) -> tuple[float, dict]:
        from synth.search.grade import answers_of, score

        task = self.tasks[int(instance["index"])]
        return score(_last_text(messages), answers_of(task)), {}


_DIFF = re.compile(r"```(?:diff|patch)?\n(.*?)```", re.S)
# evaluate's error reasons that are the model's doing (everything else: the harness could not judge)
MODEL_FAULTS = ("malformed patch", "model_patch", "the test run hit its time limit")


class SweBackend:
    PROMPT = ("Resolve this issue in {repo}. Reply with a unified diff (git apply format) "
              "in a ```diff block.\n\n{problem}")

    def __init__(self, instances: str, config: str | None = None, timeout_s: float = 1800.0,
                 max_tokens: int | None = None, repos: str | None = None):
        """``instances``: validate's validated.jsonl, or SWE-bench-format JSONL with ``repos`` (git
        clones REPOS/owner/name or bundles, as ``swe_envs evaluate --repos`` takes them)."""
        self.instances = _read_jsonl(instances, "SWE instances")
        for n, inst in enumerate(self.instances, 1):
            if not isinstance(inst.get("instance_id"), str):
                raise InputError(f"{instances}:{n}: a SWE instance needs a string 'instance_id'")
        if repos is not None and not Path(repos).is_dir():
            raise InputError(f"SWE repos: not a directory: {repos}")
        self.path, self.config, self.timeout_s, self.max_tokens = instances, config, timeout_s, max_tokens
        self.repos = repos

    def instance(self, seed: int) -> dict:
        inst = self.instances[seed % len(self.instances)]
        out = {"id": inst["instance_id"], "messages": [{"role": "user", "content": self.PROMPT.format(
            repo=inst.get("repo", "the repository"), problem=inst.get("problem_statement", ""))}]}
        if self.max_tokens:
            out["max_tokens"] = self.max_tokens
        return out

    def reward(self, instance: dict, messages: list[dict], turns=None) -> tuple[float, dict]:
        text = _last_text(messages)
        found = _DIFF.findall(text)
        patch = found[-1] if found else text
        with tempfile.TemporaryDirectory(prefix="swe-reward-") as tmp:
            # a JSON list (SWE-bench's other prediction format): a one-line JSONL file also parses as
            # one JSON object, which a reader trying JSON first takes for an id-keyed mapping
            preds = Path(tmp) / "predictions.json"
            preds.write_text(json.dumps([{"instance_id": instance["id"], "model_patch": patch,
                                          "model_name_or_path": "rollout"}]), encoding="utf-8")
            one = Path(tmp) / "instances.jsonl"
            row = next(i for i in self.instances if i["instance_id"] == instance["id"])
            write_jsonl_atomic(one, [row])
            cmd = [sys.executable, "-m", "swe_envs", "evaluate", "--instances", str(one),
                   "--predictions", str(preds), "--output", f"{tmp}/out"]
            if self.config:
                cmd += ["--config", self.config]
            if self.repos:
                cmd += ["--repos", str(self.repos)]
            proc = _harness(cmd, self.timeout_s)
            report = Path(tmp) / "out" / "report.json"
            if not report.is_file():
                raise RewardUnavailable(f"swe_envs evaluate wrote no report (exit {proc.returncode}): "
                                        f"{proc.stderr.strip()[-300:]}")
            rep = json.loads(report.read_text(encoding="utf-8"))
        iid = instance["id"]
        reason = (rep.get("reasons") or {}).get(iid, "")
        if iid in rep.get("resolved_ids", []):
            return 1.0, {"outcome": "resolved"}
        if iid in rep.get("unresolved_ids", []) or iid in rep.get("empty_patch_ids", []):
            return 0.0, {"outcome": "unresolved", "reason": reason}
        if iid in rep.get("error_ids", []) and reason.startswith(MODEL_FAULTS):
            return 0.0, {"outcome": "bad_patch", "reason": reason}  # the reply's fault: a real 0
        raise RewardUnavailable(f"swe_envs evaluate could not evaluate {iid}: {reason or 'not in the report'}")


_SCRIPT = re.compile(r"```(?:bash|sh|shell)?\n(.*?)```", re.S)


class TerminalBackend:
    """``tasks``: a Harbor task dir or a tree of them; old-layout Terminal-Bench tasks (``task.yaml``)
    in it are converted to Harbor's layout once, at load (``swe_envs.terminal.convert``, into a
    directory that lives as long as the service), under their own names so their images are the
    ones ``swe_envs terminal`` builds and caches for them."""

    def __init__(self, tasks: str, timeout_s: float = 1800.0, max_tokens: int | None = None):
        from swe_envs.terminal.convert import convert_tree, is_tb_task

        root = Path(tasks)
        if not root.is_dir():
            raise InputError(f"terminal tasks: not a directory: {root}")
        self.tasks = sorted(p.parent for p in root.rglob("task.toml"))
        if (root / "task.yaml").is_file() or any(is_tb_task(p.parent) for p in root.rglob("task.yaml")):
            self._converted = tempfile.TemporaryDirectory(prefix="terminal-harbor-")
            done, failed = convert_tree(root, Path(self._converted.name) / root.name)
            for rel, why in failed:  # counted and named, never silently missing from the task list
                print(f"terminal task {rel}: not converted: {why}", file=sys.stderr)
            self.tasks += sorted(done)
        if not self.tasks:
            raise InputError(f"no Harbor task (task.toml) or Terminal-Bench task (task.yaml) in {root}")
        self.timeout_s, self.max_tokens = timeout_s, max_tokens

    def instance(self, seed: int) -> dict:
        task = self.tasks[seed % len(self.tasks)]
        instruction = (task / "instruction.md").read_text(encoding="utf-8")
        out = {"id": task.name, "index": seed % len(self.tasks), "messages": [{"role": "user", "content": (
            f"{instruction}\n\nReply with the shell commands that do this, in one ```bash block.")}]}
        if self.max_tokens:
            out["max_tokens"] = self.max_tokens
        return out

    def script(self, messages: list[dict]) -> str:
        last = messages[-1]
        for call in last.get("tool_calls") or []:  # a bash tool call counts as the script too
            args = json.loads(call["function"].get("arguments") or "{}")
            if isinstance(args.get("command"), str):
                return args["command"]
        found = _SCRIPT.findall(_last_text(messages))
        return found[-1] if found else _last_text(messages)

    def reward(self, instance: dict, messages: list[dict], turns=None) -> tuple[float, dict]:
        task = self.tasks[int(instance["index"])]
        with tempfile.TemporaryDirectory(prefix="term-reward-") as tmp:
            copy = Path(tmp) / task.name  # the reply becomes this copy's solution; the task is untouched
            shutil.copytree(task, copy)
            (copy / "solution").mkdir(exist_ok=True)
            (copy / "solution" / "solve.sh").write_text("#!/bin/bash\n" + self.script(messages) + "\n")
            proc = _harness([sys.executable, "-m", "swe_envs", "terminal", "run", "--task", str(copy),
                             "--agent", "oracle", "--output", f"{tmp}/out"], self.timeout_s)
            results = list(Path(tmp, "out").rglob("result.json"))
            rewards = []
            for r in results:
                data = json.loads(r.read_text(encoding="utf-8"))
                value = data.get("reward")  # a trial's reward; None when it errored (the job summary has none)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    rewards.append(float(value))
            if not rewards:
                raise RewardUnavailable(f"terminal run produced no reward (exit {proc.returncode}): "
                                        f"{proc.stderr.strip()[-300:]}")
        return rewards[0], {}


def build_backend(kind: str, args: dict[str, Any]):
    classes = {"toy": ToyBackend, "search": SearchBackend, "swe": SweBackend, "terminal": TerminalBackend}
    if kind not in classes:
        raise ConfigError(f"task kind {kind!r}: expected one of {sorted(classes)}")
    try:
        return classes[kind](**args)
    except TypeError as err:
        raise ConfigError(f"task kind {kind!r}: bad args {sorted(args)}: {err}") from None
