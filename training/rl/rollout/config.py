"""Configuration of the multi-task rollout orchestrator (``python -m training.rl orchestrator``).

Task services and rollout servers are either *managed* (the orchestrator launches the processes,
restarts them when heartbeats stop) or *external* (an endpoint that registers itself or is listed
here — e.g. an SGLang server for GPU users). Heartbeats follow the lifecycle a cold server needs:
failures during ``first_wait_s`` after launch/registration do not count (a model still loading is
not killed), afterwards a server silent for ``timeout_s`` leaves routing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from core.config import StrictModel

TaskKind = Literal["toy", "arithmetic", "search", "swe", "terminal"]


class TaskServiceConfig(StrictModel):
    name: str  # the task id every trajectory carries
    kind: TaskKind = "toy"
    replicas: int = Field(default=1, ge=0)  # managed processes to launch (0 = external only)
    endpoints: list[str] = []  # external services already running (they may also self-register)
    capacity: int = Field(default=4, gt=0)  # concurrent requests one replica accepts
    ratio: float = Field(default=1.0, gt=0)  # share of groups issued for this task
    rate_limit_per_s: float | None = Field(default=None, gt=0)  # groups started per second
    args: dict[str, Any] = {}  # passed to the service (e.g. toy task name, data paths)


class RolloutConfig(StrictModel):
    backend: Literal["ours", "sglang", "vllm"] = "ours"  # ours speaks SGLang's /generate
    replicas: int = Field(default=1, ge=0)  # managed `training.rl serve` processes
    endpoints: list[str] = []  # external servers (SGLang/vLLM or ours started by hand)
    capacity: int = Field(default=2, gt=0)  # requests in flight per server
    threads: int = Field(default=1, ge=0)  # torch threads per managed server
    # tokens per continuous-batching round of a managed server: each round re-reads the context as
    # its prompt (weights may change between rounds), so long contexts want longer rounds
    chunk_tokens: int = Field(default=16, gt=0)
    model: str = "default"  # model name sent to vLLM's OpenAI route


class SamplingConfig(StrictModel):
    temperature: float = Field(default=1.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=16, gt=0)  # a task instance may ask for its own


class HeartbeatConfig(StrictModel):
    first_wait_s: float = Field(default=60.0, ge=0)  # grace after launch/registration
    interval_s: float = Field(default=1.0, gt=0)
    timeout_s: float = Field(default=5.0, gt=0)  # silent this long after being healthy = unhealthy
    restart: bool = True  # relaunch a managed process that became unhealthy
    max_restarts: int = Field(default=5, ge=0)  # per process slot


class FaultConfig(StrictModel):
    """Faults injected on purpose, each counted (``OUT/faults.jsonl`` + the run summary)."""

    kill_task_service_after_groups: list[int] = []  # SIGKILL a managed task service at these counts
    kill_rollout_server_after_groups: list[int] = []  # SIGKILL a managed rollout server
    task_slow_prob: float = Field(default=0.0, ge=0, le=1)  # a task service answers late ...
    task_slow_s: float = Field(default=0.0, ge=0)  # ... by this much (past request_timeout_s = a timeout)
    task_garble_prob: float = Field(default=0.0, ge=0, le=1)  # ... or with a body that is not JSON
    rollout_slow_prob: float = Field(default=0.0, ge=0, le=1)
    rollout_slow_s: float = Field(default=0.0, ge=0)
    rollout_garble_prob: float = Field(default=0.0, ge=0, le=1)
    trainer_crash_after_updates: list[int] = []  # the trainer process exits hard after these updates


class OrchestratorConfig(StrictModel):
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0)  # 0 picks a free port
    seed: int = 0
    group_size: int = Field(default=4, gt=0)  # samples per prompt (group-normalised advantages)
    min_group_size: int = Field(default=2, gt=0)  # a group with fewer survivors is dropped whole
    max_ahead_groups: int = Field(default=8, gt=0)  # async: groups generating or waiting in the buffer
    workers: int = Field(default=4, gt=0)  # concurrent trajectory jobs
    max_attempts: int = Field(default=3, gt=0)  # per trajectory, failures only (aborts are free)
    request_timeout_s: float = Field(default=60.0, gt=0)
    checkpoint: str | None = None  # weights managed rollout servers start from
    tokenizer: str | None = None  # tokenizer.json; default: the checkpoint's
    tasks: list[TaskServiceConfig] = []
    rollout: RolloutConfig = RolloutConfig()
    sampling: SamplingConfig = SamplingConfig()
    heartbeat: HeartbeatConfig = HeartbeatConfig()
    faults: FaultConfig = FaultConfig()
    thinking: bool = False  # render prompts with thinking on (GLM-5 chat template)
    # every group that reaches the buffer, as Trajectory payloads (messages, reward and its info, token
    # ids, logprobs, versions) in OUT/rollouts.jsonl: what the policy did, readable by export-sft
    save_rollouts: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> OrchestratorConfig:
        if self.min_group_size > self.group_size:
            raise ValueError(f"min_group_size ({self.min_group_size}) > group_size ({self.group_size})")
        names = [t.name for t in self.tasks]
        if len(names) != len(set(names)):
            raise ValueError(f"task names must be unique, got {names}")
        return self
