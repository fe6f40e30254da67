"""Harbor task directories: read, validate, write.

A task: ``instruction.md``, ``task.toml``, ``environment/`` (a ``Dockerfile``, a
``docker-compose.yaml``, or ``[environment].docker_image``), ``solution/solve.sh`` and
``tests/test.sh`` (which writes ``/logs/verifier/reward.txt`` or ``reward.json``). A multi-step
task has ``steps/<name>/{instruction.md,tests/,solution/}`` run in order in one environment.

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
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
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


@dataclass
class Step:
    name: str
    instruction: str
    tests_dir: Path
    solution_dir: Path | None
    timeout_sec: float | None = None
    verifier: StepVerifierSection | None = None  # [steps.verifier]: its mode and environment
    artifacts: list[ArtifactEntry] = field(default_factory=list)  # [[steps]].artifacts
    # Harbor uploads the task's tests/ to /tests before a step's own (a step's test.sh may use shared files)
    shared_tests: Path | None = None

    @property
    def tests_dirs(self) -> list[Path]:
        """What /tests gets, in upload order."""
        return [d for d in (self.shared_tests, self.tests_dir) if d is not None and d.is_dir()]


@dataclass
class HarborTask:
    path: Path
    config: TaskConfig
    instruction: str
    steps: list[Step] = field(default_factory=list)
    # a separate verifier's environment (verifier.py): built from tests/ rather than environment/, and
    # its [verifier.environment].docker_image taking precedence over a Dockerfile there, as in Harbor
    env_dir: Path | None = None
    image_first: bool = False

    @property
    def name(self) -> str:
        return (self.config.task.name if self.config.task and self.config.task.name else None) or self.path.name

    @property
    def environment_dir(self) -> Path:
        return self.env_dir or self.path / "environment"

    @property
    def dockerfile(self) -> Path | None:
        p = self.environment_dir / "Dockerfile"
        return p if p.is_file() and not (self.image_first and self.config.environment.docker_image) else None

    @property
    def compose_file(self) -> Path | None:
        for n in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml"):
            if (self.environment_dir / n).is_file():
                return self.environment_dir / n
        return None

    @property
    def multi_step(self) -> bool:
        return (self.path / "steps").is_dir()


def is_harbor_task(path: Path) -> bool:
    return (path / "task.toml").is_file()


def load_task(path: str | Path) -> HarborTask:
    """Load and validate a Harbor task directory; any problem is a TaskFormatError naming it."""
    root = Path(path)
    if not root.is_dir():
        raise TaskFormatError(f"task directory not found: {root}")
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise TaskFormatError(f"{root}: no task.toml (an old Terminal-Bench task? convert it first)")
    cfg = parse_task_toml(toml_path.read_text(encoding="utf-8"), str(toml_path))
    instruction = _read(root / "instruction.md")
    env = root / "environment"
    has_env = any((env / n).is_file() for n in ("Dockerfile", "docker-compose.yaml", "docker-compose.yml",
                                                "compose.yaml"))
    if not has_env and not cfg.environment.docker_image:
        raise TaskFormatError(f"{root}: environment/ has no Dockerfile or docker-compose.yaml "
                              "and [environment].docker_image is not set")
    task = HarborTask(root, cfg, instruction or "")
    if (root / "steps").is_dir():
        task.steps = _load_steps(root, cfg)
    else:
        if not instruction or not instruction.strip():
            raise TaskFormatError(f"{root}: instruction.md is missing or empty")
        if not (root / "tests" / "test.sh").is_file() and not _image_owns_tests(cfg, None):
            raise TaskFormatError(f"{root}: tests/test.sh is missing")
        sol = root / "solution"
        task.steps = [Step("main", instruction, root / "tests", sol if sol.is_dir() else None)]
    _check_verifiers(task)
    return task


def _load_steps(root: Path, cfg: TaskConfig) -> list[Step]:
    dirs = {p.name: p for p in (root / "steps").iterdir() if p.is_dir()}
    # an explicit [[steps]] list fixes the order; otherwise directory names in sorted order
    order = [s.name for s in cfg.steps] if cfg.steps else sorted(dirs)
    entries = {s.name: s for s in cfg.steps or []}
    missing = [n for n in order if n not in dirs]
    if missing:
        raise TaskFormatError(f"{root}: task.toml steps {missing} have no steps/<name>/ directory")
    if not order:
        raise TaskFormatError(f"{root}: steps/ is empty")
    steps = []
    for n in order:
        d = dirs[n]
        text = _read(d / "instruction.md") or (_read(root / "instruction.md") if n == order[0] else None)
        if not text or not text.strip():
            raise TaskFormatError(f"{root}: steps/{n}/instruction.md is missing or empty")
        e = entries.get(n)
        # Harbor: a step without its own tests/test.sh is verified by the task's shared tests/
        own = (d / "tests" / "test.sh").is_file()
        tests = d / "tests" if own else root / "tests"
        if not (tests / "test.sh").is_file() and not _image_owns_tests(cfg, e and e.verifier):
            raise TaskFormatError(f"{root}: steps/{n}/tests/test.sh is missing (and there is no shared tests/test.sh)")
        # Harbor's [steps.verifier].timeout_sec, or the older [[steps]].timeout_sec
        timeout = e and (e.timeout_sec or (e.verifier.timeout_sec if e.verifier else None))
        steps.append(Step(n, text, tests, d / "solution" if (d / "solution").is_dir() else None, timeout or None,
                          e.verifier if e else None, list(e.artifacts) if e else [],
                          root / "tests" if own and (root / "tests").is_dir() else None))
    return steps


def _image_owns_tests(cfg: TaskConfig, step: StepVerifierSection | None) -> bool:
    """A separate verifier whose prebuilt image holds /tests/test.sh (the task need not ship one)."""
    from swe_envs.terminal.verifier import verifier_mode

    return verifier_mode(cfg, step) == "separate" and any(
        v is not None and v.environment is not None and v.environment.docker_image for v in (step, cfg.verifier))


def _check_verifiers(task: HarborTask) -> None:
    """A separate verifier's definition resolved now, so a task it cannot run is a format error at load."""
    from swe_envs.terminal.verifier import separate_verifier

    for s in task.steps:
        separate_verifier(task, s)


def _read(p: Path) -> str | None:
    if not p.is_file():
        return None
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskFormatError(f"{p}: not UTF-8 text") from None


def validate_task(path: str | Path) -> list[str]:
    """Problems that do not stop loading but make a task unusable for training (empty list = fine)."""
    task = load_task(path)
    problems = []
    for s in task.steps:
        if s.solution_dir is None or not (s.solution_dir / "solve.sh").is_file():
            problems.append(f"step {s.name}: no solution/solve.sh (the oracle cannot run)")
    if task.dockerfile:
        text = task.dockerfile.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"^\s*(?:COPY|ADD)\s+(?:--\S+\s+)*(.+)$", text, re.MULTILINE | re.IGNORECASE):
            srcs = m.group(1).split()[:-1]
            for s in srcs:
                if s.strip("./").split("/")[0] in ("tests", "solution"):
                    problems.append(f"Dockerfile bakes {s} into the image (tests/solution must be uploaded)")
    return problems


def write_task(dest: str | Path, config: TaskConfig, instruction: str, files: dict[str, bytes | str]) -> Path:
    """Write a task dir: task.toml, instruction.md and ``files`` (relative path -> content)."""
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(config.to_toml(), encoding="utf-8")
    (root / "instruction.md").write_text(instruction, encoding="utf-8")
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            p.write_text(content, encoding="utf-8")
        else:
            p.write_bytes(content)
        if p.suffix == ".sh":
            p.chmod(0o755)
    return root
