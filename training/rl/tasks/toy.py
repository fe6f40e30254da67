"""Verifiable toy tasks with programmatic rewards, for CPU demonstrations and tests.

One small vocabulary covers every task (``VOCAB``: control tokens, one marker per task, the
digits). A prompt is ``[marker, d1 .. dn, "="]``; the model answers with digits and ends its
turn with ``<eos>``. Rewards are the fraction of answer positions that are right, so a
partly right answer earns partial credit (a dense signal a tiny model can climb).

- ``copy``: the digits as given; ``sort``: ascending; ``reverse``: reversed; ``shift``: each
  digit plus ``offset`` modulo 10 (position-wise, so a copy-trained model is one mapping away).
- ``lookup`` (agentic): the answer is ``table[k]`` for a table the model never sees. The
  model calls the tool by emitting ``<call> k`` and ending the call with ``<obs>`` (as a chat
  model ends a tool call with ``<|observation|>``); the environment appends ``v "="`` — an
  observation that is context, never trained — and the model answers ``v <eos>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from core.config import StrictModel
from core.errors import ConfigError

CONTROL = ["<pad>", "<eos>", "=", "<call>", "<obs>"]
# one marker per kind, plus spare ones so two tasks of one kind can differ (``marker:``)
MARKERS = ["copy", "sort", "reverse", "shift", "lookup", "m1", "m2", "m3"]
DIGITS = [str(d) for d in range(10)]
VOCAB = CONTROL + MARKERS + DIGITS
ID = {t: i for i, t in enumerate(VOCAB)}
PAD, EOS, SEP, CALL, OBS = (ID[t] for t in CONTROL)
DIGIT0 = ID["0"]
STOP_TOKENS = [EOS, OBS]


class ToyTaskConfig(StrictModel):
    kind: Literal["copy", "sort", "reverse", "shift", "lookup"]
    digits: int = Field(default=3, gt=0)  # answer length for copy/sort/reverse/shift
    offset: int = 1  # shift: added to every digit (mod 10)
    marker: str | None = None  # prompt marker token (default: the kind's); tasks of one kind differ by it
    seed: int = 0  # the lookup table


@dataclass
class Problem:
    task: str
    prompt: list[int]
    answer: list[int]  # expected answer tokens (no <eos>)
    key: int = -1  # lookup: the key


def decode(tokens: list[int]) -> str:
    return " ".join(VOCAB[t] if 0 <= t < len(VOCAB) else f"<{t}>" for t in tokens)


class ToyTask:
    stop_ids = STOP_TOKENS

    def __init__(self, name: str, cfg: ToyTaskConfig):
        if cfg.marker is not None and cfg.marker not in MARKERS:
            raise ConfigError(f"tasks.{name}.marker: {cfg.marker!r} is not one of {MARKERS}")
        self.name, self.cfg = name, cfg
        self.table = np.random.default_rng([cfg.seed, 7]).permutation(10)

    @property
    def max_turns(self) -> int:
        return 2 if self.cfg.kind == "lookup" else 1

    def problems(self, n: int, rng: np.random.Generator) -> list[Problem]:
        marker = ID[self.cfg.marker or self.cfg.kind]
        out = []
        for _ in range(n):
            if self.cfg.kind == "lookup":
                k = int(rng.integers(10))
                out.append(Problem(self.name, [marker, DIGIT0 + k, SEP], [DIGIT0 + int(self.table[k])], k))
                continue
            d = rng.integers(0, 10, size=self.cfg.digits).tolist()
            shifted = [(x + self.cfg.offset) % 10 for x in d]
            ans = {"copy": d, "sort": sorted(d), "reverse": d[::-1], "shift": shifted}[self.cfg.kind]
            out.append(Problem(self.name, [marker] + [DIGIT0 + x for x in d] + [SEP], [DIGIT0 + x for x in ans]))
        return out

    def observe(self, problem: Problem, turn: list[int]) -> list[int] | None:
        """The environment's reply to a model turn (tokens appended to the context, never
        trained), or None when the episode is over."""
        if self.cfg.kind != "lookup" or not turn or turn[-1] != OBS:
            return None
        if len(turn) == 3 and turn[0] == CALL and turn[1] == DIGIT0 + problem.key:
            return [problem.answer[0], SEP]
        return [SEP]  # a malformed call gets an empty observation

    def reward(self, problem: Problem, turns: list[list[int]]) -> float:
        """Reward of an episode from the model's turns (observations not included): the
        fraction of answer positions right in the final turn."""
        final = turns[-1] if turns else []
        got = final[: len(problem.answer)]
        return sum(int(a == b) for a, b in zip(got, problem.answer, strict=False)) / len(problem.answer)

    def reference(self, problem: Problem) -> tuple[list[int], list[int]]:
        """A correct full sequence and its loss mask (for SFT): prompt untrained, answer and
        ``<eos>`` trained; a lookup also trains the call and leaves the observation out."""
        p = problem.prompt
        if self.cfg.kind == "lookup":
            call, obs, ans = [CALL, DIGIT0 + problem.key, OBS], [problem.answer[0], SEP], problem.answer + [EOS]
            tokens = p + call + obs + ans
            return tokens, [0] * len(p) + [1] * 3 + [0] * 2 + [1] * len(ans)
        tokens = p + problem.answer + [EOS]
        return tokens, [0] * len(p) + [1] * (len(problem.answer) + 1)
