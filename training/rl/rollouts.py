"""Rollouts: batched multi-turn episodes through the sampler, recorded token-in/token-out.

A ``Trajectory`` holds exactly the tokens the policy saw and produced: the prompt, each
model turn as sampled (its stop token included) and each environment observation between
turns. ``loss_mask`` is 1 only on model-generated tokens (the agentic mask: observations are
in context but never trained) and ``logprobs`` holds the sampler's logprob of each generated
token (0 elsewhere), so the trainer trains on the sampled tokens themselves, never on a
re-tokenisation of decoded text.

Agent loops that rebuild their prompt each turn (e.g. re-rendering messages with the chat
template) must extend the previous context append-only; ``extend_context`` checks that and
refuses otherwise, because training on a context the model never saw corrupts the
importance ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from training.model.glm import GLMModel
from training.rl.toy_tasks import Problem, ToyTask
from training.serving.sampler import SamplingParams, sample


class NotAppendOnly(ValueError):
    """A re-rendered context does not extend the tokens the model already saw."""


def extend_context(previous: Sequence[int], rendered: Sequence[int]) -> list[int]:
    """The new tokens of ``rendered`` after ``previous``; raise if ``rendered`` rewrote any of
    ``previous`` (e.g. a template that clears earlier thinking, or a BPE merge across the
    boundary)."""
    n = len(previous)
    if len(rendered) < n or list(rendered[:n]) != list(previous):
        at = next((i for i, (a, b) in enumerate(zip(previous, rendered, strict=False)) if a != b), min(n, len(rendered)))
        raise NotAppendOnly(f"re-rendered context differs from the sampled one at token {at} of {n}")
    return list(rendered[n:])


@dataclass
class Trajectory:
    task: str
    prompt_len: int
    tokens: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    group: int  # index of the prompt this sample belongs to (G samples share one)
    turns: list[list[int]] = field(default_factory=list)  # the model's turns
    reward: float = 0.0
    finish_reason: str = "stop"
    weight_version: int = 0

    @property
    def response_tokens(self) -> int:
        return sum(self.loss_mask)


def rollout(
    model: GLMModel,
    task: ToyTask,
    problems: list[Problem],
    group_size: int,
    params: SamplingParams,
    generator: torch.Generator | None = None,
    weight_version: int = 0,
) -> list[Trajectory]:
    """``group_size`` episodes per problem, ordered group by group, with rewards."""
    trajs = [
        Trajectory(task.name, len(p.prompt), list(p.prompt), [0] * len(p.prompt), [0.0] * len(p.prompt), g,
                   weight_version=weight_version)
        for g, p in enumerate(problems)
        for _ in range(group_size)
    ]  # fmt: skip
    live = list(range(len(trajs)))
    for _ in range(task.max_turns):
        if not live:
            break
        outs = sample(model, [trajs[i].tokens for i in live], params, generator)
        nxt = []
        for i, out in zip(live, outs, strict=True):
            t = trajs[i]
            t.tokens += out.tokens
            t.loss_mask += [1] * len(out.tokens)
            t.logprobs += out.logprobs
            t.turns.append(out.tokens)
            t.finish_reason = out.finish_reason
            obs = task.observe(problems[t.group], out.tokens) if out.finish_reason == "stop" else None
            if obs:
                t.tokens += obs
                t.loss_mask += [0] * len(obs)
                t.logprobs += [0.0] * len(obs)
                nxt.append(i)
        live = nxt
    for t in trajs:
        t.reward = task.reward(problems[t.group], t.turns)
    return trajs
