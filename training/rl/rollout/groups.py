"""What the orchestrator keeps while it builds a group: the group's shared prompt, and one job per
trajectory (the trajectory so far plus where its next call stands)."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.rl.trajectory import Trajectory


@dataclass
class Group:
    id: str
    task: str
    instance: dict
    messages: list[dict]
    prompt_ids: list[int]
    sampling: dict
    version: int  # the weights pushed when the group was created
    max_turns: int = 1
    token_level: bool = False  # the service gave prompt ids (no chat template)
    jobs: list[Job] = field(default_factory=list)

    def new_trajectory(self, traj_id: str, attempts: int = 0) -> Trajectory:
        return Trajectory(traj_id, self.task, self.id, list(self.prompt_ids), weight_version=self.version,
                          attempts=attempts, messages=list(self.messages))


@dataclass
class Job:
    """One trajectory in the making."""

    traj: Trajectory
    group: Group
    stage: str = "generate"  # generate | step | grade | done | dropped
    epoch: int = 0  # bumped on resubmission; a reply for an older epoch is ignored
    slot: str | None = None  # server the current call went to (None when not calling)

    @property
    def id(self) -> str:
        return self.traj.id

    def reset(self) -> None:
        """Start the episode over (its server died or aborted it): partial tokens are not kept."""
        self.stage = "generate"
        self.traj = self.group.new_trajectory(self.traj.id, self.traj.attempts)
