"""The trajectory: one episode, token-in/token-out, from sampling to the policy update.

One type everywhere: the in-process stage runner builds it while it samples, the orchestrator
builds it from rollout servers and task services, the trainer process receives it over HTTP and
the update trains on it. Its serialized form is its fields (``payload``/``from_payload``): what
the orchestrator's ``/batch`` sends and what a JSONL of trajectories holds (an SFT dataset reads
its ``messages`` and ``reward``).

Everything after the prompt is kept exactly as sampled (model turns, each token with its rollout
logprob and the weight version that sampled it) or as the environment returned it (observations:
context, never trained), so the trainer trains on the sampled tokens themselves, never on a
re-tokenisation of decoded text. ``loss_mask`` is 1 only on model-generated tokens (the agentic
mask). Agent loops that rebuild their prompt each turn must extend the context append-only
(``extend_context``): training on a context the model never saw corrupts the importance ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Trajectory:
    id: str
    task: str
    group: str  # the trajectories of one group share the task instance and prompt
    prompt_ids: list[int]
    # per token after the prompt:
    output_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1 = sampled by the policy (trained)
    logprobs: list[float] = field(default_factory=list)  # rollout logprob (0 on observations)
    token_versions: list[int] = field(default_factory=list)  # weight version that produced the token
    turns: list[list[int]] = field(default_factory=list)  # the model's turns
    # the oldest weights that sampled any of its tokens (the version it was issued at before
    # any): staleness is measured from it
    weight_version: int = 0
    finish_reason: str = ""
    reward: float | None = None  # None until graded
    reward_info: dict = field(default_factory=dict)
    attempts: int = 0  # failed calls on the way (resubmissions)
    messages: list[dict] = field(default_factory=list)  # the unified OpenAI-style list, prompt included

    @property
    def tokens(self) -> list[int]:
        """The row the trainer sees: prompt + everything after it."""
        return self.prompt_ids + self.output_ids

    def add_turn(self, ids: list[int], logprobs: list[float], versions: list[int]) -> None:
        """A model turn as sampled: trained, with its rollout logprobs and weight versions."""
        if not len(ids) == len(logprobs) == len(versions):
            raise ValueError(f"a turn of {len(ids)} tokens has {len(logprobs)} logprobs, {len(versions)} versions")
        if versions:
            first = not any(self.loss_mask)
            self.weight_version = min(versions) if first else min(self.weight_version, *versions)
        self.output_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += logprobs
        self.token_versions += versions
        self.turns.append(list(ids))

    def add_observation(self, ids: list[int]) -> None:
        """The environment's reply: context for the next turn, never trained."""
        self.output_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        last = self.token_versions[-1] if self.token_versions else self.weight_version
        self.token_versions += [last] * len(ids)

    def payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> Trajectory:
        return cls(**data)  # an unknown or missing required key raises: the two sides drifted apart


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
