"""Configs of the terminal-task runner (``configs/terminal.yaml``), strict pydantic models.

``substitutes`` maps upstream images (fnmatch patterns on the FROM reference) to local
equivalents built from a debootstrapped Debian suite, so tasks build where no image registry is
reachable; the first matching rule wins. Suites give interpreters by era: bullseye (Python 3.9),
bookworm (3.11), trixie (3.13).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config import StrictModel
from core.llm import LLMConfig

# what Docker's buildpack-deps / language images carry that tasks rely on
_BUILDPACK = ["ca-certificates", "curl", "wget", "git", "gnupg", "build-essential", "pkg-config", "procps",
              "xz-utils", "bzip2", "unzip", "file", "less", "patch"]
_PY = ["python3", "python3-venv", "python3-pip", "python-is-python3"]
# the python:3.x images' pip installs into their own interpreter; Debian's is marked externally
# managed (PEP 668), which would refuse a test script's plain `pip install` and a Dockerfile's
# `uv pip install --system` (Harbor's verifier template): the marker goes, as those images have none
_PY_SETUP = ["ENV PIP_BREAK_SYSTEM_PACKAGES=1", "RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED"]


class SubstituteRule(StrictModel):
    match: list[str]  # fnmatch patterns, e.g. "python:3.13*", "*/t-bench/python-3-13:*"
    suite: Literal["bullseye", "bookworm", "trixie"] = "bookworm"
    apt_packages: list[str] = Field(default_factory=list)
    # extra Dockerfile lines (RUN/ENV) after the packages
    setup: list[str] = Field(default_factory=list)
    # offline tools provisioned in the image (see substitute.PROVISIONERS): uv, pytest wheels, shims
    provision: list[str] = Field(default_factory=lambda: ["shims"])


def default_substitutes() -> list[SubstituteRule]:
    rules = [
        {"match": ["*python-3-13*", "python:3.13*", "python:3.12*", "python:3.14*"], "suite": "trixie",
         "apt_packages": _BUILDPACK + _PY + ["tmux"], "provision": ["shims", "uv", "pytest"], "setup": _PY_SETUP},
        {"match": ["python:3.11*", "python:3.10*", "python:3"], "suite": "bookworm",
         "apt_packages": _BUILDPACK + _PY, "provision": ["shims", "uv", "pytest"], "setup": _PY_SETUP},
        {"match": ["python:3.9*", "python:3.8*"], "suite": "bullseye",
         "apt_packages": _BUILDPACK + ["python3", "python3-venv", "python3-pip"], "provision": ["shims", "uv", "pytest"],
         "setup": _PY_SETUP},
        {"match": ["buildpack-deps:*", "ubuntu:*", "debian:*"], "suite": "bookworm",
         "apt_packages": _BUILDPACK + ["python3", "python3-venv"], "provision": ["shims", "uv", "pytest"],
         # Ubuntu jammy's pip predates PEP 668: tasks `pip install` into the system Python
         "setup": ["ENV PIP_BREAK_SYSTEM_PACKAGES=1"]},
        # astral's uv image, which Harbor's task template copies uv out of (`COPY --from=ghcr.io/astral-sh/uv:0.9.7
        # /uv /usr/local/bin/uv`): PyPI's uv (the newest, not the tag's) at /uv and /uvx as real files (COPY --from
        # copies a link as a link), on bookworm with Python for its python-tagged variants used as a base
        {"match": ["ghcr.io/astral-sh/uv:*", "astral/uv:*"], "suite": "bookworm", "apt_packages": _BUILDPACK + _PY,
         "provision": ["shims", "uv", "pytest"], "setup": _PY_SETUP + [
             "RUN cp -L /opt/provision/venv/bin/uv /uv && { cp -L /opt/provision/venv/bin/uvx /uvx 2>/dev/null "
             "|| printf '#!/bin/sh\\nexec /uv tool run \"$@\"\\n' > /uvx; } && chmod 755 /uv /uvx"]},
        {"match": ["node:*"], "suite": "bookworm", "apt_packages": _BUILDPACK + ["nodejs", "npm"]},
        {"match": ["golang:*"], "suite": "bookworm", "apt_packages": _BUILDPACK + ["golang-go"]},
        {"match": ["rust:*"], "suite": "bookworm", "apt_packages": _BUILDPACK + ["cargo", "rustc"]},
        {"match": ["*openjdk*", "eclipse-temurin:*", "maven:*"], "suite": "bookworm",
         "apt_packages": _BUILDPACK + ["default-jdk-headless", "maven"]},
    ]
    return [SubstituteRule.model_validate(r) for r in rules]


class ImagesConfig(StrictModel):
    substitutes: list[SubstituteRule] = Field(default_factory=default_substitutes)
    # where the Debian base of a suite comes from (built with debootstrap when missing)
    base_tag: str = "local/debian:{suite}"
    build_timeout_s: float = Field(default=1800.0, gt=0)
    build_memory_mb: int = Field(default=4096, ge=256)
    # task images of one language share their first layers; builds running at once would each
    # build those layers (Docker does not share an in-progress layer), so builds queue by default
    build_concurrency: int = Field(default=1, ge=1)
    # Debian packages renamed for tasks written against Ubuntu (the apt-get shim applies them)
    apt_renames: dict[str, str] = Field(default_factory=lambda: {
        "openjdk-21-jdk": "openjdk-17-jdk", "openjdk-21-jdk-headless": "openjdk-17-jdk-headless",
        "openjdk-21-jre": "openjdk-17-jre"})
    # pytest (and its dependencies) downloaded into the image's wheelhouse for offline `uv add pytest==X`
    pytest_versions: list[str] = Field(default_factory=lambda: ["8.4.1", "8.3.5"])
    # uv locks for every platform: pytest's marker-only dependencies (colorama on Windows,
    # exceptiongroup/tomli before Python 3.11) must be in the wheelhouse too
    wheel_extras: list[str] = Field(default_factory=lambda: ["colorama", "exceptiongroup", "tomli"])
    # a test script's `curl .../uv/<version>/install.sh | sh`: false = the uv the substitute image provisions
    # answers it; true = the pinned version from its PyPI wheel (a ~40 MB layer in every task image)
    uv_pinned: bool = False


class RunnerConfig(StrictModel):
    # "none": every container offline (the air-gapped default); "task": follow [environment] network_mode
    network: Literal["none", "task"] = "none"
    memory_mb_default: int = Field(default=2048, ge=64)
    memory_mb_max: int = Field(default=8192, ge=64)
    cpus_max: float = Field(default=2.0, gt=0)
    pids: int = Field(default=1024, ge=16)
    # the writable layers of a trial's containers (no single file above it either): swe_envs/disk_guard.py
    disk_mb: int = Field(default=10240, ge=64)
    # a command past its limit is killed inside the container; the host waits this much longer
    exec_margin_s: float = Field(default=30.0, ge=0)
    # scales the task's agent and verifier timeouts (Harbor's --timeout-multiplier): tasks are timed on
    # idle machines, a shared or slow one needs more
    timeout_multiplier: float = Field(default=1.0, gt=0)
    # caps on the task's own timeouts, so one bad task cannot hold a worker for hours
    agent_timeout_max_s: float = Field(default=1800.0, gt=0)
    verifier_timeout_max_s: float = Field(default=1800.0, gt=0)
    keep_image: bool = True
    # a separate verifier's artifacts copied out of the agent's containers, in all (swe_envs/terminal/verifier.py)
    artifacts_max_mb: int = Field(default=1024, ge=1)
    # isolation (swe_envs/terminal/isolation.py): every capability is dropped and only these are given
    # back: CHOWN and FOWNER, measured necessary (GNU tar run as root restores an archive's owners and
    # modes: every Aider-polyglot oracle unpacks its reference so). agent_user: who runs agent and
    # solution commands when the task's [agent].user names nobody ("" = the image's user, uid 0 in most)
    cap_add: list[str] = Field(default_factory=lambda: ["CHOWN", "FOWNER"])
    agent_user: str = ""


class AgentConfig(StrictModel):
    llm: LLMConfig | None = None
    max_turns: int = Field(default=30, ge=1)
    max_tokens: int = Field(default=1024, gt=0)
    temperature: float = Field(default=0.0, ge=0)
    command_timeout_s: float = Field(default=120.0, gt=0)
    max_observation_chars: int = Field(default=8000, ge=200)


class SynthConfig(StrictModel):
    llm: LLMConfig | None = None  # proposer and refiner
    judge_llm: LLMConfig | None = None  # rubric judge; default: the proposer's endpoint
    rounds: int = Field(default=3, ge=1)
    max_tokens: int = Field(default=1500, gt=0)
    temperature: float = Field(default=0.7, ge=0)
    base_image: str = "local/debian:bookworm"  # what the proposer is told builds offline
    log_tail_chars: int = Field(default=2000, ge=100)
    seed: int = 0


class TerminalConfig(StrictModel):
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    synth: SynthConfig = Field(default_factory=SynthConfig)
