"""Configs of the SWE environment job (``configs/swe_envs.yaml``), strict pydantic models.

Defaults build on ``local/debian:bookworm`` (made offline by ``docker_setup``) and install
each language's toolchain from Debian packages. Users point ``languages.<name>.base_image``
at real upstream images (``python:3.11-slim``, ``node:20``, ``maven:3-eclipse-temurin-17`` …)
and trim ``apt_packages`` to what those images lack.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from pydantic import Field, field_validator

from core.config import StrictModel
from core.llm import LLMConfig

LANGUAGES = ("python", "javascript", "java", "go", "rust", "c", "cpp", "php", "ruby")


class ToolchainConfig(StrictModel):
    base_image: str = "local/debian:bookworm"
    # era-correct toolchains: version -> base image giving it (Debian suites on the mirror);
    # chosen per repo-version from evidence (``swe_envs.envs.rules.era``). Empty: base_image only.
    versions: dict[str, str] = Field(default_factory=dict)
    apt_packages: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # extra Dockerfile lines after the packages (e.g. creating a venv)
    setup: list[str] = Field(default_factory=list)


# Debian's own toolchains and runners, from the suite that gives the era's version (Python
# 3.9 / 3.11 / 3.13 from bullseye / bookworm / trixie). Python packages come from the host's
# package index through uv (installed into every Python image), era-pinned per repo-version.
# C and C++ share one package list, hence one image (same Dockerfile, same content hash).
_NATIVE = ["build-essential", "cmake", "libgtest-dev"]
SUITES = {"bullseye": "local/debian:bullseye", "bookworm": "local/debian:bookworm", "trixie": "local/debian:trixie"}
DEFAULT_TOOLCHAINS: dict[str, dict] = {
    "python": {
        "versions": {"3.9": SUITES["bullseye"], "3.11": SUITES["bookworm"], "3.13": SUITES["trixie"]},
        "apt_packages": ["python3", "python3-venv", "python3-dev"],
        "env": {"PATH": "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "VIRTUAL_ENV": "/opt/venv", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_CACHE": "1"},
        # a venv of its own (no Debian site-packages leaking into the tests), with uv in it:
        # recipes resolve era-correct dependencies with `uv pip install --exclude-newer`
        "setup": ["RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir uv"],
    },
    "javascript": {"apt_packages": ["nodejs", "mocha"],
                   "versions": {"12": SUITES["bullseye"], "18": SUITES["bookworm"], "20": SUITES["trixie"]}},
    "java": {"apt_packages": ["default-jdk-headless", "junit5"],
             "versions": {"11": SUITES["bullseye"], "17": SUITES["bookworm"], "21": SUITES["trixie"]}},
    "go": {"apt_packages": ["golang-go"],
           "versions": {"1.15": SUITES["bullseye"], "1.19": SUITES["bookworm"], "1.24": SUITES["trixie"]},
           "env": {"GOCACHE": "/home/swe/.cache/go-build", "GOPATH": "/home/swe/go", "GOFLAGS": "-mod=mod",
                   "GOTOOLCHAIN": "local"}},
    "rust": {"apt_packages": ["cargo", "rustc"], "env": {"CARGO_HOME": "/home/swe/.cargo"},
             "versions": {"1.48": SUITES["bullseye"], "1.63": SUITES["bookworm"], "1.85": SUITES["trixie"]}},
    "c": {"apt_packages": _NATIVE},
    "cpp": {"apt_packages": _NATIVE},
    "php": {"apt_packages": ["php-cli", "php-xml", "php-mbstring", "phpunit"]},
    "ruby": {"apt_packages": ["ruby", "ruby-rspec", "ruby-minitest"]},
}


def default_toolchains() -> dict[str, ToolchainConfig]:
    return {name: ToolchainConfig.model_validate(DEFAULT_TOOLCHAINS[name]) for name in LANGUAGES}


class SandboxConfig(StrictModel):
    cpus: float = Field(default=2.0, gt=0)
    memory_mb: int = Field(default=2048, ge=64)
    pids: int = Field(default=512, ge=16)
    test_timeout_s: float = Field(default=600.0, gt=0)  # one test-command run
    user: str = "10001:10001"  # the non-root user every toolchain image creates
    # test containers get no network; "bridge" (SWE-bench's harness) per repo or instance
    # through validation.network, recorded in the environment spec
    network: str = "none"
    # a container past runs * test_timeout_s + this margin is killed from the host
    container_margin_s: float = Field(default=60.0, ge=0)
    # a test run's log is cut (and the run stopped) at this size; no file in the container may
    # grow past max_file_mb (a hostile or broken suite printing or writing gigabytes)
    max_log_mb: int = Field(default=64, ge=1)
    max_file_mb: int = Field(default=2048, ge=16)
    # the test container's writable layer in all (many files, each under max_file_mb): swe_envs/disk_guard.py
    disk_mb: int = Field(default=10240, ge=64)


# what a profile's extras and requirements may be (they go into a shell line, quoted): names and version bounds
_PROFILE_SHAPES = {
    "extras": (r"[A-Za-z0-9][A-Za-z0-9_.-]*", "an extra's name"),
    "requirements": (r"[A-Za-z0-9][A-Za-z0-9_.\-\[\],]*\s*([<>=!~]=?[^;\s'\"]+\s*,?\s*)*",
                     "a requirement (name and version bounds)"),
}


class EnvProfile(StrictModel):
    """How a dataset's own harness built a repository's environments, where the era's cut-off gives
    other packages than it did, so validate's FAIL_TO_PASS/PASS_TO_PASS agree with the dataset's lists
    (a test that passes with the era's docutils failed in the harness's newer one, and the dataset lists
    what the harness saw). Applied per repository and task version, recorded in the environment spec."""

    repo: str
    versions: list[str] = Field(default_factory=list)  # task versions (SWE-bench ``version``); empty: every one
    # the cut-off instead of the task's era: the day the harness resolved its unpinned installs
    resolve_at: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    extras: list[str] = Field(default_factory=list)  # installed with the repository: ``-e '.[test]'``
    requirements: list[str] = Field(default_factory=list)  # pins installed with it, e.g. ``jinja2<3.0``
    source: str = ""  # where these facts come from

    @field_validator("extras", "requirements")
    @classmethod
    def _shaped(cls, v: list[str], info) -> list[str]:
        pattern, what = _PROFILE_SHAPES[info.field_name]
        bad = [x for x in v if not re.fullmatch(pattern, x)]
        if bad:
            raise ValueError(f"not {what}: {bad}")
        return v

    def applies(self, repo: str, version: str | None) -> bool:
        return self.repo == repo and (not self.versions or str(version) in self.versions)


# SWE-bench's harness builds sphinx's images with Python 3.9 and `pip install -e .[test]`, resolved when its
# images were built (SWE-bench Verified, 2024-08; the day is not published: 2024-07-01 is the one measured,
# docs/swe-envs.md), pinning for versions 3.0-4.4 what those releases break on (Jinja2 3, MarkupSafe 2.1,
# the sphinxcontrib packages that require Sphinx 5). The era's packages pass tests its lists say fail.
_SPHINX_3_4 = [f"{major}.{minor}" for major, top in ((3, 5), (4, 4)) for minor in range(top + 1)]
DEFAULT_PROFILES: list[dict] = [
    {"repo": "sphinx-doc/sphinx", "resolve_at": "2024-07-01", "extras": ["test"],
     "source": "SWE-bench harness: sphinx environments (unpinned `.[test]`, images built mid-2024)"},
    {"repo": "sphinx-doc/sphinx", "versions": _SPHINX_3_4,
     "requirements": ["jinja2<3.0", "markupsafe<=2.0.1", "alabaster>=0.7,<0.7.12", "sphinxcontrib-applehelp<=1.0.7",
                      "sphinxcontrib-devhelp<=1.0.5", "sphinxcontrib-qthelp<=1.0.6",
                      "sphinxcontrib-htmlhelp<=2.0.4", "sphinxcontrib-serializinghtml<=1.1.9"],
     "source": "SWE-bench harness: sphinx 3.0-4.4 pins"},
]


def default_profiles() -> list[EnvProfile]:
    return [EnvProfile.model_validate(p) for p in DEFAULT_PROFILES]


@dataclass(frozen=True)
class AppliedProfile:
    """The profiles that apply to one repo-version, merged: the last date wins, the rest adds up."""

    resolve_at: str | None = None
    extras: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def record(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()} if self.sources else {}


class BuildConfig(StrictModel):
    timeout_s: float = Field(default=1800.0, gt=0)
    memory_mb: int = Field(default=4096, ge=256)
    refine_rounds: int = Field(default=6, ge=1)  # attempts in all, the template being the first
    # CA bundle trusted in every image; None: the one the host's tools use (SSL_CERT_FILE, pip's
    # `cert`, the system bundle); "" trusts only the image's own CAs
    ca_bundle: str | None = None
    # hand the host's package-index settings (pip/uv, npm, Go, cargo, Maven) to every build
    host_index_settings: bool = True
    # era-correct dependencies: nothing released after the repo-version's date (uv --exclude-newer,
    # npm --before)
    exclude_newer: bool = True
    # per repository (and task version): a dataset harness's environment, where the era's differs from it
    profiles: list[EnvProfile] = Field(default_factory=default_profiles)
    max_recipe_lines: int = Field(default=20, ge=1)
    log_tail_chars: int = Field(default=3000, ge=200)  # of a failed build shown to the LLM
    # an endpoint proposes revised recipes after a failure; none = templates only
    llm: LLMConfig | None = None
    llm_max_tokens: int = Field(default=400, gt=0)
    # rebuild every Dockerfile step (Docker's --no-cache): fresh apt packages, or a cold benchmark
    no_cache: bool = False
    # toolchain tags include it; with no_cache, a separate set of images (every environment built on
    # them too): a cold benchmark that must not remove or replace the images other work is using
    cache_namespace: str = ""

    def profile(self, repo: str, version: str | None) -> AppliedProfile:
        hits = [p for p in self.profiles if p.applies(repo, version)]
        dates = [p.resolve_at for p in hits if p.resolve_at]
        return AppliedProfile(dates[-1] if dates else None,
                              tuple(dict.fromkeys(e for p in hits for e in p.extras)),
                              tuple(r for p in hits for r in p.requirements),
                              tuple(p.source or p.repo for p in hits))


class ValidateConfig(StrictModel):
    runs: int = Field(default=2, ge=1)  # runs per phase; a test whose status differs is flaky
    workers: int = Field(default=2, ge=1)  # instances validated at once
    # per repository: language and test command overrides, e.g. {"org/repo": "pytest -rA tests"}
    languages: dict[str, str] = Field(default_factory=dict)
    test_commands: dict[str, str] = Field(default_factory=dict)
    # per repository: the log parser (a built-in runner name, or file:PATH of an accepted LLM parser)
    parsers: dict[str, str] = Field(default_factory=dict)
    # run only the test files the test patch touches (SWE-bench's test directives) where the
    # language can; the collection check always runs the whole suite
    select_touched_tests: bool = True
    # compiled languages: a test patch for a new API may not compile before the fix; when true,
    # a before-run that parsed nothing and failed counts every test as failing
    before_may_fail_to_build: bool = False
    keep_logs: bool = True
    # per repository or instance_id: the test containers' network ("bridge"); default sandbox.network
    network: dict[str, str] = Field(default_factory=dict)
    # per repository: a command running one test, "{test}" standing for its id; checks an LLM
    # parser (validation.parsers: file:PATH) against single-test exit codes when a log has no JUnit XML
    single_test_commands: dict[str, str] = Field(default_factory=dict)
    # per repository: the test-id scheme of the dataset's FAIL_TO_PASS lists (swe_envs.envs.parsers.test_ids:
    # native, pytest-options, bare-name); unset: SWE-bench's own per-repository schemes
    id_schemes: dict[str, str] = Field(default_factory=dict)


class LLMParserConfig(StrictModel):
    timeout_s: float = Field(default=10.0, gt=0)  # one parser run on one log
    memory_mb: int = Field(default=512, ge=64)
    rounds: int = Field(default=2, ge=1)
    max_tokens: int = Field(default=700, gt=0)
    max_log_chars: int = Field(default=6000, ge=200)  # of the sample log shown to the LLM (its tail)
    llm: LLMConfig | None = None
    # a truth without a failing (or passing) test accepts vacuous parsers: refuse to check against it
    min_truth_failing: int = Field(default=1, ge=0)
    min_truth_passing: int = Field(default=1, ge=0)
    check_truncated: bool = True  # a candidate must not see a runner summary in a log cut in half
    max_single_tests: int = Field(default=8, ge=2)  # tests run alone for an exit-code truth
    single_test_timeout_s: float = Field(default=120.0, gt=0)


class SweEnvsConfig(StrictModel):
    toolchains: dict[str, ToolchainConfig] = Field(default_factory=default_toolchains)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    validation: ValidateConfig = Field(default_factory=ValidateConfig)
    llm_parser: LLMParserConfig = Field(default_factory=LLMParserConfig)

    def toolchain(self, language: str) -> ToolchainConfig:
        if language in self.toolchains:
            return self.toolchains[language]
        return default_toolchains()[language]
