"""A verifiable text task: arithmetic and word problems generated with their answers, graded by
program — for any policy with a tokenizer and chat template (ours: GLM-5's; a Hugging Face
model: its own ``apply_chat_template``).

A problem is one user message ("What is 17 + 5? Answer with the number only." or a word problem
with the same numbers); the prompt is that message rendered by the policy's codec, so the same
task trains SmolLM2 and our tiny model alike. The reply is decoded to text and its last integer
is the answer (GSM8K's convention). Reward: 1 when it equals the true answer; otherwise, when
``partial_credit`` > 0, ``partial_credit * max(0, 1 - |given - answer| / (|answer| + 1))`` for a
reply that gives a number — a dense signal a small model can climb — and 0 without a number.
``accuracy`` (exact answers) is what evaluation reports beside the reward.

``conversations`` gives the problems with their reference answers as chat records, the SFT data
that teaches the answer format before RL.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field

from core.config import StrictModel

NUMBER = re.compile(r"-?\d+")
NAMES = ["Ann", "Bo", "Chen", "Dana", "Eli", "Fatima", "Goran", "Hana"]
THINGS = ["apple", "book", "coin", "marble", "pencil", "stamp"]
# word problems per operation: (template, needs a >= b)
WORDS = {
    "+": "{n} has {a} {t}s and gets {b} more. How many {t}s does {n} have now?",
    "-": "{n} has {a} {t}s and gives {b} away. How many {t}s are left?",
    "*": "{n} buys {a} bags with {b} {t}s in each. How many {t}s is that?",
}
INSTRUCTION = "Answer with the number only."
APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


class ArithmeticTaskConfig(StrictModel):
    kind: Literal["arithmetic"]
    ops: list[Literal["+", "-", "*"]] = ["+", "-"]
    max_operand: int = Field(default=20, gt=0)  # operands drawn from [0, max_operand]
    words: float = Field(default=0.0, ge=0, le=1)  # share of problems phrased as word problems
    partial_credit: float = Field(default=0.5, ge=0, lt=1)  # the most a wrong number earns (by closeness)


@dataclass
class TextProblem:
    task: str
    messages: list[dict]
    answer: int
    prompt: list[int] = field(default_factory=list)  # the messages rendered by the policy's codec
    ref: str = ""  # the environment task a problem stands for (``training.rl.tasks.code``)


def given_answer(text: str) -> int | None:
    found = NUMBER.findall(text)
    return int(found[-1]) if found else None


def grade(text: str, answer: int, partial_credit: float) -> float:
    got = given_answer(text)
    if got is None:
        return 0.0
    if got == answer:
        return 1.0
    return partial_credit * max(0.0, 1.0 - abs(got - answer) / (abs(answer) + 1))


class ArithmeticTask:
    """The stage runner's task API (as ``training.rl.tasks.toy.ToyTask``), over a chat codec."""

    max_turns = 1

    def __init__(self, name: str, cfg: ArithmeticTaskConfig, codec=None):
        self.name, self.cfg, self.codec = name, cfg, codec
        self.stop_ids = list(codec.stop_ids) if codec is not None else []

    def question(self, rng: np.random.Generator) -> tuple[str, int]:
        op = self.cfg.ops[int(rng.integers(len(self.cfg.ops)))]
        a, b = (int(x) for x in rng.integers(0, self.cfg.max_operand + 1, size=2))
        if op == "-" and b > a:  # no negative counts in a word problem
            a, b = b, a
        answer = APPLY[op](a, b)
        if rng.random() < self.cfg.words:
            text = WORDS[op].format(n=NAMES[int(rng.integers(len(NAMES)))], t=THINGS[int(rng.integers(len(THINGS)))],
                                    a=a, b=b)
        else:
            text = f"What is {a} {op} {b}?"
        return f"{text} {INSTRUCTION}", answer

    def problems(self, n: int, rng: np.random.Generator) -> list[TextProblem]:
        out = []
        for _ in range(n):
            text, answer = self.question(rng)
            p = TextProblem(self.name, [{"role": "user", "content": text}], answer)
            if self.codec is not None:
                p.prompt = self.codec.chat_prompt(p.messages)
            out.append(p)
        return out

    def observe(self, problem: TextProblem, turn: list[int]) -> list[int] | None:
        return None  # one turn

    def reply(self, turns: list[list[int]]) -> str:
        return self.codec.decode(turns[-1]) if turns else ""

    def reward(self, problem: TextProblem, turns: list[list[int]]) -> float:
        return grade(self.reply(turns), problem.answer, self.cfg.partial_credit)

    def reference_reply(self, problem: TextProblem) -> list[int]:
        """The reference answer's tokens, as SFT's reply starts (the chat template's end of turn aside)."""
        return self.codec.encode(str(problem.answer))

    def conversations(self, n: int, rng: np.random.Generator) -> list[dict]:
        """``n`` problems with their reference answers as chat records (SFT data)."""
        return [{"messages": [*p.messages, {"role": "assistant", "content": str(p.answer)}]}
                for p in (ArithmeticTask(self.name, self.cfg).problems(n, rng))]


class ArithmeticBackend:
    """The task as a task service serves it (``python -m training.rl task-service --kind
    arithmetic``): an instance is the user message (and its answer), the reward is graded on the
    text of the last assistant message — the orchestrator renders and decodes with the policy's codec."""

    def __init__(self, max_tokens: int | None = None, **task):
        self.task = ArithmeticTask("arithmetic", ArithmeticTaskConfig(kind="arithmetic", **task))
        self.max_tokens = max_tokens

    def instance(self, seed: int) -> dict:
        p = self.task.problems(1, np.random.default_rng(seed))[0]
        out = {"id": str(seed), "messages": p.messages, "answer": p.answer}
        return out | ({"max_tokens": self.max_tokens} if self.max_tokens else {})

    def reward(self, instance: dict, messages: list[dict], turns=None) -> tuple[float, dict]:
        reply = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        value = grade(reply, int(instance["answer"]), self.task.cfg.partial_credit)
        return value, {"correct": value == 1.0}
