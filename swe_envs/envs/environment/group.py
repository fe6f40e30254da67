"""One repo-version's environment, as validate and evaluate both build it: the builder wired from
the config (images with the host's registry access, sandbox, LLM refine loop), the commit the image
is built at, and what the group's instances say (dates, version, the test files they touch)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.llm import LLMClient
from swe_envs.config import SweEnvsConfig
from swe_envs.diff import patch_paths
from swe_envs.envs.environment.builder import EnvBuilder, Environment
from swe_envs.git import git
from swe_envs.images import Images
from swe_envs.registry import host_access
from swe_envs.sandbox import Sandbox


def make_builder(client, cfg: SweEnvsConfig, out: Path, log: Callable[[str], None] = print) -> EnvBuilder:
    """Images (with the host's registry access), sandbox and refine loop, shared by validate and evaluate."""
    llm = LLMClient(cfg.build.llm) if cfg.build.llm else None
    parser_llm = LLMClient(cfg.llm_parser.llm) if cfg.llm_parser.llm else None
    access = host_access(cfg.build.ca_bundle, cfg.build.host_index_settings)
    images = Images(client, cfg.build, access, log)
    return EnvBuilder(cfg, images, Sandbox(client, cfg.sandbox), llm, out / "logs" / "environments",
                      parser_llm, out / "parsers")


def build_group(builder: EnvBuilder, cfg: SweEnvsConfig, repo: str, path: Path, commit: str,
                members: list[dict[str, Any]]) -> Environment:
    """The environment of one repo-version, from what its instances say (dates, version, tests)."""
    lang = cfg.validation.languages.get(repo)
    touched = sorted({p for m in members for p in patch_paths(m.get("test_patch") or "")})
    versions = sorted({str(m["version"]) for m in members if m.get("version")})
    # an instance at the environment's own commit first: its test patch applies there
    at_commit = sorted(members, key=lambda m: m.get("base_commit") != commit)
    return builder.build(repo, path, commit, lang, cfg.validation.test_commands.get(repo),
                         cfg.validation.parsers.get(repo),
                         created_at=[str(m["created_at"]) for m in members if m.get("created_at")],
                         version=versions[-1] if versions else None,
                         network=cfg.validation.network.get(repo), collect_files=touched,
                         truth_patch=next((m.get("test_patch") or "" for m in at_commit), ""))


def environment_commit(path: Path, inst: dict[str, Any]) -> str:
    """The commit a repo-version's image is built at: ``environment_setup_commit`` when the clone
    has it (a shallow clone or a bundle may not), else the instance's own base commit."""
    env_commit = inst.get("environment_setup_commit")
    if env_commit and env_commit != inst["base_commit"]:
        try:
            git(path, "cat-file", "-e", f"{env_commit}^{{commit}}")
            return env_commit
        except Exception:
            pass  # recorded: the environment spec names the commit it was built at
    return inst["base_commit"]
