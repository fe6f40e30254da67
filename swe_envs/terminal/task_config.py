"""Harbor's ``task.toml``, as a model: its two shapes, its sections, and what the verifier mode resolves to.

``task.toml`` comes in two shapes and both load into one model: legacy (``version = "1.0"``,
``[metadata]``, ``[environment] allow_internet``, ``memory = "2G"``) and current
(``schema_version``, ``[task]``, ``[environment] network_mode``, ``[environment.healthcheck]``).
Unknown keys are kept (they round-trip on write): Harbor grows keys faster than we do, and a
converter that silently drops one would change a task. Known keys are type-checked and a bad
value is an error naming the key.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import PurePosixPath
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.config import format_validation_error
from core.errors import UserError

NETWORK_MODES = ("public", "no-network", "allowlist")


class TaskFormatError(UserError):
    """A task directory or task.toml that cannot be used; the message names the file and key."""


class _Section(BaseModel):
    # extra="allow": unknown keys are kept and written back unchanged
    model_config = ConfigDict(extra="allow", validate_assignment=True)


def _size_mb(value: Any, key: str) -> int | None:
    """'2G', '512M', '1024' (MB) or an int -> MB."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a size like '2G' or a number of MB")
    if isinstance(value, int | float):
        return int(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value), re.IGNORECASE)
    if not m:
        raise ValueError(f"{key} must be a size like '2G' or '512M', got {value!r}")
    scale = {"": 1, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


class TaskSection(_Section):
    name: str | None = None
    description: str | None = None


class Healthcheck(_Section):
    command: str
    interval_sec: float = Field(default=5.0, gt=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    retries: int = Field(default=3, ge=0)
    start_period_sec: float = Field(default=0.0, ge=0)


class EnvironmentSection(_Section):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    memory: str | int | None = None
    storage_mb: int | None = Field(default=None, gt=0)
    storage: str | int | None = None
    docker_image: str | None = None
    allow_internet: bool | None = None
    network_mode: Literal["public", "no-network", "allowlist"] | None = None
    allowlist: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    healthcheck: Healthcheck | None = None

    @field_validator("memory", "storage")
    @classmethod
    def _size(cls, v: Any, info) -> Any:
        _size_mb(v, info.field_name)  # raises with the key's name
        return v

    def memory_limit_mb(self, default: int = 2048) -> int:
        return self.memory_mb or _size_mb(self.memory, "memory") or default

    def network(self) -> str:
        """The network mode, from either shape (legacy ``allow_internet``)."""
        if self.network_mode:
            return self.network_mode
        if self.allow_internet is not None:
            return "public" if self.allow_internet else "no-network"
        return "public"


class ArtifactEntry(_Section):
    """Harbor's ``artifacts`` entry: a path collected from a service after the agent's phase and put back
    at the same path in a separate verifier's container (``destination``: where the trial keeps it)."""

    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None  # a compose service; None or "main": the agent's container

    @field_validator("source")
    @classmethod
    def _no_parent(cls, v: str) -> str:
        if not v.strip() or ".." in PurePosixPath(v).parts:
            raise ValueError(f"an artifact's source must be a path without '..', got {v!r}")
        return v

    @field_validator("destination")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        if v and (v.startswith("/") or "\\" in v or ".." in PurePosixPath(v).parts or v.rstrip("/") == "manifest.json"):
            raise ValueError(f"an artifact's destination must be a relative path inside the trial, got {v!r}")
        return v or None

    @model_validator(mode="after")
    def _sidecar_absolute(self) -> ArtifactEntry:
        if self.service not in (None, "main") and not self.source.startswith("/"):
            raise ValueError(f"artifact {self.source!r} from service {self.service!r} must be an absolute path")
        return self


def _artifacts(v: Any) -> Any:
    """Harbor writes an entry as a path or as a table: both load as ``ArtifactEntry``."""
    return [{"source": x} if isinstance(x, str) else x for x in v] if isinstance(v, list) else v


class CollectHook(_Section):
    """``[[verifier.collect]]``: a command run in a service after the agent's phase, before artifacts are collected."""

    command: str
    service: str = "main"
    timeout_sec: float = Field(default=60.0, gt=0)
    user: str | None = None


class VerifierSection(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    # Harbor's verifier modes: "shared" (the agent's container) or "separate" (a container of its own);
    # unset: separate when [verifier.environment] is given, else shared
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentSection | None = None
    collect: list[CollectHook] = Field(default_factory=list)

    @model_validator(mode="after")
    def _mode_and_environment(self) -> VerifierSection:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = 'shared' cannot have a [verifier.environment] (set 'separate')")
        return self

    def mode(self) -> str | None:
        """The mode this table says, or None where it leaves it to the task's."""
        return self.environment_mode or ("separate" if self.environment is not None else None)


class StepVerifierSection(VerifierSection):
    timeout_sec: float | None = Field(default=None, gt=0)  # unset: the task's


class AgentSection(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)
    user: str | None = None


class SolutionSection(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class StepEntry(_Section):
    name: str
    timeout_sec: float | None = Field(default=None, gt=0)
    verifier: StepVerifierSection | None = None
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    @field_validator("artifacts", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        return _artifacts(v)


class TaskConfig(_Section):
    version: str | None = None  # legacy shape
    schema_version: str | None = None  # current shape
    task: TaskSection | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    steps: list[StepEntry] | None = None
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    @field_validator("artifacts", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        return _artifacts(v)

    @property
    def shape(self) -> str:
        return "current" if self.schema_version is not None or self.task is not None else "legacy"

    def to_toml(self) -> str:
        # exclude_unset: a file read and written back keeps exactly its keys (defaults not materialised)
        return tomli_w.dumps(_drop_none(self.model_dump(exclude_unset=True, by_alias=True)))


def _drop_none(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    if isinstance(d, list):
        return [_drop_none(v) for v in d]
    return d


def parse_task_toml(text: str, source: str = "task.toml") -> TaskConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise TaskFormatError(f"{source}: invalid TOML: {err}") from None
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as err:
        raise TaskFormatError(format_validation_error(err, source).replace("\n", "; ")) from None


def verifier_mode(cfg: TaskConfig, step: StepVerifierSection | None) -> str:
    """Harbor's resolve_step_verifier_mode: the step's own, then the task's, then shared."""
    return (step.mode() if step is not None else None) or cfg.verifier.mode() or "shared"

