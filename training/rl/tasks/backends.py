"""What each task service serves: instances to roll out, and the reward of a finished trajectory.

A backend has ``instance(seed) -> dict`` (``id``, prompt ``messages`` — or ``prompt_ids`` for a
token-level task —, optional ``max_tokens``, ``max_turns``, ``stop_token_ids``; the dict travels
back with every request, so a service replica that never saw it can serve it), optionally
``step(instance, turns) -> observation ids | None`` (multi-turn tasks; a session backend,
``session = True``, also takes ``messages`` and ``episode`` and returns ``tool`` messages), and
``reward(instance, messages, turns) -> (float, info)``. Rewards come from the project's real graders
and harnesses, never from the service itself:

* ``toy``      — ``training.rl.tasks.toy`` (copy/sort/reverse/lookup, programmatic reward, token-level)
* ``arithmetic`` — ``training.rl.tasks.arithmetic`` (arithmetic/word problems as text, graded by program)
* ``search``   — deep-search tasks from ``python -m synth.search generate``, ``synth.search.grade.score``
* ``swe``      — SWE instances as multi-turn sessions (``training.rl.tasks.sessions``): the
                 policy's tool calls run in the instance's container, the reward is the
                 session's verify (FAIL_TO_PASS ∪ PASS_TO_PASS on the container's diff)
* ``terminal`` — Harbor tasks as multi-turn sessions; the reward is the task's verifier

A harness that cannot produce a reward (no docker, a crash) raises ``RewardUnavailable``
(``training.rl.tasks.sessions``): the service answers 503 and the orchestrator retries or drops
the trajectory with a reason — an unavailable reward is never scored 0.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from core.errors import ConfigError, InputError
from core.io import read_jsonl


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


def build_backend(kind: str, args: dict[str, Any]):
    from training.rl.tasks.arithmetic import ArithmeticBackend
    from training.rl.tasks.sessions import swe_sessions, terminal_sessions

    classes = {"toy": ToyBackend, "search": SearchBackend, "swe": swe_sessions, "terminal": terminal_sessions,
               "arithmetic": ArithmeticBackend}
    if kind not in classes:
        raise ConfigError(f"task kind {kind!r}: expected one of {sorted(classes)}")
    try:
        return classes[kind](**args)
    except TypeError as err:
        raise ConfigError(f"task kind {kind!r}: bad args {sorted(args)}: {err}") from None
