"""Harbor task directories: read, validate, write.

A task: ``instruction.md``, ``task.toml`` (its model: ``task_config.py``), ``environment/`` (a
``Dockerfile``, a ``docker-compose.yaml``, or ``[environment].docker_image``), ``solution/solve.sh`` and
``tests/test.sh`` (which writes ``/logs/verifier/reward.txt`` or ``reward.json``). A multi-step
task has ``steps/<name>/{instruction.md,tests/,solution/}`` run in order in one environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from swe_envs.terminal.task_config import (
    ArtifactEntry,
    StepVerifierSection,
    TaskConfig,
    TaskFormatError,
    parse_task_toml,
    verifier_mode,
)

__all__ = ["HarborTask", "Step", "TaskConfig", "TaskFormatError", "is_harbor_task", "load_task", "parse_task_toml",
           "validate_task", "write_task"]


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
    return verifier_mode(cfg, step) == "separate" and any(
        v is not None and v.environment is not None and v.environment.docker_image for v in (step, cfg.verifier))


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
