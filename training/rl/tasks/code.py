"""A verifiable code task for text policies: Harbor tasks whose answer is one source file
(EvoEval's Python problems from the Terminal-Bench seeds: "complete the function, write it to
solution.py"), graded by the task's own tests in its container.

A problem is the task's instruction plus how to answer single-shot: the whole file in one fenced
code block. The reply's first fenced block (or, with no fence, the whole reply) is written to
``solution_path`` in a fresh session of the task (``training.rl.tasks.sessions``: the task's image,
offline, limited, no host mounts — the model's code runs only there) and the task's verifier runs
its tests; the reward is the verifier's (1 when every test passes). Each reply gets its own session,
so nothing one sample's code leaves behind can help another pass. A verifier that cannot judge (no
Docker, a build failure) raises ``RewardUnavailable``: never scored 0.

The task list is split once, by a seeded shuffle of the task names, into ``heldout`` evaluation
tasks and the training tasks the RL stage samples from — a held-out task is never trained on.
"""

from __future__ import annotations

import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
from pydantic import Field

from core.config import StrictModel
from core.errors import ConfigError
from training.rl.tasks.arithmetic import TextProblem

FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
ANSWER_FORMAT = ("Answer in one reply, without running anything: give the complete contents of {path} "
                 "in a single ```python code block. It is written to {path} and the task's tests are run on it.")


class CodeTaskConfig(StrictModel):
    kind: Literal["code"]
    # Harbor tasks (task.toml) or Terminal-Bench tasks (task.yaml, converted at load); relative: the user cache
    tasks: str = "terminal-seeds/evoeval"
    solution_path: str = "/app/solution.py"
    heldout: int = Field(default=16, gt=0)  # tasks kept for evaluation, never trained on
    split_seed: int = 0
    max_sessions: int = Field(default=2, gt=0)  # replies graded at once (one container each)
    config: str | None = None  # a TerminalConfig YAML for the runner (default: its defaults)


def code_of(reply: str) -> str:
    """The file a reply gives: its first fenced block (an unclosed one runs to the end), else the reply."""
    m = FENCE.search(reply)
    return (m.group(1) if m else reply).strip("\n") + "\n"


class CodeTask:
    """The stage runner's task API (as ``ArithmeticTask``) over Harbor task sessions."""

    max_turns = 1

    def __init__(self, name: str, cfg: CodeTaskConfig, codec=None, sessions=None):
        from training.rl.tasks.sessions import data_path, terminal_sessions

        self.name, self.cfg, self.codec = name, cfg, codec
        if sessions is None and not data_path(cfg.tasks).is_dir():
            raise ConfigError(f"tasks.{name}.tasks: no task tree at {data_path(cfg.tasks)} (the EvoEval seeds are "
                              "extracted there by `make data-terminal` or benchmarks/grpo_code.py)")
        self.stop_ids = list(codec.stop_ids) if codec is not None else []
        # the converted tasks and each verify's output: a work directory of this task's own, removed by close()
        self._work = tempfile.TemporaryDirectory(prefix="code-task-", ignore_cleanup_errors=True)
        self.sessions = sessions or terminal_sessions(cfg.tasks, cfg.config, out=self._work.name,
                                                      max_sessions=cfg.max_sessions)
        names = list(self.sessions.names)
        if len(names) <= cfg.heldout:
            raise ConfigError(f"tasks.{name}: {len(names)} tasks under {cfg.tasks}, not more than heldout={cfg.heldout}")
        order = np.random.default_rng(cfg.split_seed).permutation(len(names))
        self.heldout_names = sorted(names[i] for i in order[: cfg.heldout])
        self.train_names = sorted(names[i] for i in order[cfg.heldout:])

    def _problem(self, task: str) -> TextProblem:
        text = self.sessions.instructions[task].strip() + "\n\n" + ANSWER_FORMAT.format(path=self.cfg.solution_path)
        p = TextProblem(self.name, [{"role": "user", "content": text}], answer=0, ref=task)
        if self.codec is not None:
            p.prompt = self.codec.chat_prompt(p.messages)
        return p

    def problems(self, n: int, rng: np.random.Generator) -> list[TextProblem]:
        """``n`` training problems drawn from the training tasks."""
        return [self._problem(self.train_names[int(i)]) for i in rng.integers(len(self.train_names), size=n)]

    def heldout_problems(self, n: int, rng: np.random.Generator | None = None) -> list[TextProblem]:
        """The held-out tasks, each once (at most ``n``)."""
        return [self._problem(t) for t in self.heldout_names[:n]]

    def observe(self, problem: TextProblem, turn: list[int]) -> list[int] | None:
        return None  # one turn

    def reply(self, turns: list[list[int]]) -> str:
        return self.codec.decode(turns[-1]) if turns else ""

    def grade(self, problem: TextProblem, reply: str) -> float:
        files = {self.cfg.solution_path: code_of(reply)}
        reward, _ = self.sessions.grade_files(problem.ref, files)
        return reward

    def reward(self, problem: TextProblem, turns: list[list[int]]) -> float:
        return self.grade(problem, self.reply(turns))

    def rewards(self, items: list[tuple[TextProblem, list[list[int]]]]) -> list[float]:
        """Rewards of many episodes, ``max_sessions`` graded at once."""
        with ThreadPoolExecutor(self.cfg.max_sessions) as pool:
            return list(pool.map(lambda it: self.reward(*it), items))

    def close(self) -> None:
        self.sessions.shutdown()
        self._work.cleanup()
