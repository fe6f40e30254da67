"""What the orchestrator keeps while it builds a group: the group's shared prompt, and one job per
trajectory (the trajectory so far plus where its next call stands, and for a session task the
episode and the task-service replica holding its session)."""

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
    session: bool = False  # each trajectory is an environment session on one task-service replica
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
    episode: int = 0  # bumped when the episode starts over: a session task opens a fresh session
    home: str | None = None  # session tasks: the task-service replica holding the episode's session

    @property
    def id(self) -> str:
        return self.traj.id

    @property
    def episode_key(self) -> str:
        return f"{self.traj.id}.{self.episode}"

    def reset(self) -> None:
        """Start the episode over (its server died or aborted it): partial tokens are not kept."""
        self.stage = "generate"
        self.traj = self.group.new_trajectory(self.traj.id, self.traj.attempts)
        self.episode += 1
        self.home = None


def group_of(gid: str, task: str, inst: dict, codec, cfg, version: int) -> Group:
    """The group for a task instance: its prompt rendered once (GLM-5 template, the instance's
    tools) or taken as token ids, its sampling and turn limits. Raises on a malformed instance."""
    token_level = "prompt_ids" in inst
    if token_level:
        prompt_ids = [int(t) for t in inst["prompt_ids"]]
        if not prompt_ids:
            raise ValueError("empty prompt_ids")
    else:
        prompt_ids = codec.chat_prompt(inst["messages"], thinking=cfg.thinking, tools=inst.get("tools") or None)
    s = cfg.sampling
    stops = inst.get("stop_token_ids", codec.stop_ids)
    sampling = {"temperature": s.temperature, "top_p": s.top_p, "stop_token_ids": [int(t) for t in stops],
                "max_tokens": int(inst.get("max_tokens") or s.max_tokens)}
    return Group(gid, task, inst, inst["messages"], prompt_ids, sampling, version, int(inst.get("max_turns", 1)),
                 token_level, bool(inst.get("session")))
