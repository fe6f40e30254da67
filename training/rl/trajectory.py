"""The orchestrator's unit of work: a group of trajectories sharing one task instance and prompt.

A trajectory is token-in/token-out: everything after the prompt is kept exactly as sampled (model
turns, with their logprobs and the weight version of every token) or as the environment returned it
(observations, never trained), next to the unified OpenAI-style message list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Traj:
    """One episode: model turns (sampled, trained) and environment observations (context only)
    after the group's prompt, token-in/token-out."""

    id: str
    group: Group
    stage: str = "generate"  # generate | step | grade | done | dropped
    attempts: int = 0
    epoch: int = 0  # bumped on resubmission; a reply for an older epoch is ignored
    slot: str | None = None  # server the current call went to (None when not calling)
    output_ids: list[int] = field(default_factory=list)  # everything after the prompt
    loss_mask: list[int] = field(default_factory=list)  # 1 = sampled by the policy
    logprobs: list[float] = field(default_factory=list)  # rollout logprob (0 on observations)
    versions: list[int] = field(default_factory=list)  # weight version per token
    turns: list[list[int]] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)  # the unified message list after the prompt
    finish_reason: str = ""
    reward: float | None = None
    info: dict = field(default_factory=dict)

    def reset(self) -> None:
        """Start the episode over (its server died or aborted it): partial tokens are not kept."""
        self.stage, self.finish_reason = "generate", ""
        self.output_ids, self.loss_mask, self.logprobs, self.versions = [], [], [], []
        self.turns, self.messages = [], []

    def payload(self) -> dict[str, Any]:
        g = self.group
        sampled = [v for v, m in zip(self.versions, self.loss_mask, strict=True) if m]
        return {"id": self.id, "group": g.id, "task": g.task, "prompt_ids": g.prompt_ids,
                "output_ids": self.output_ids, "loss_mask": self.loss_mask, "logprobs": self.logprobs,
                "token_versions": self.versions, "turns": self.turns,
                "weight_version": min(sampled, default=g.version), "finish_reason": self.finish_reason,
                "reward": self.reward, "reward_info": self.info, "attempts": self.attempts,
                "messages": g.messages + self.messages}


@dataclass
class Group:
    id: str
    task: str
    instance: dict
    messages: list[dict]
    prompt_ids: list[int]
    sampling: dict
    version: int
    max_turns: int = 1
    token_level: bool = False  # the service gave prompt ids (no chat template)
    trajs: list[Traj] = field(default_factory=list)
