"""One environment built from a repository of the given files through the real builder, shipped defaults."""

from __future__ import annotations

from pathlib import Path

from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment.builder import EnvBuilder, Environment
from swe_envs.images import Images
from swe_envs.sandbox import Sandbox
from tests.swe_envs.envs.regen_fixtures import make_git


def build_fresh(client, tmp_path: Path, name: str, files: dict[str, str], language: str) -> tuple[EnvBuilder, Environment]:
    """(builder, environment) of ``tests/<name>``; an image an earlier session verified is removed and the
    environment built again, so the refine loop itself is exercised."""
    repo, head = make_git(tmp_path / name, files)
    cfg = SweEnvsConfig()
    builder = EnvBuilder(cfg, Images(client, cfg.build), Sandbox(client, cfg.sandbox), None, tmp_path / "logs")
    env = builder.build(f"tests/{name}", repo, head, language=language)
    if env.ok and env.cached:
        client.images.remove(env.image, force=True)
        env = builder.build(f"tests/{name}", repo, head, language=language)
    return builder, env
