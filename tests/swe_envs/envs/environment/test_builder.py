"""The refine loop: rule fixes, LLM-proposed recipes (scripted endpoint, real SmolLM2), every attempt recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.llm import LLMClient, LLMConfig
from samples.swe_envs.lang_repos import LangRepo, make_repo
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment.builder import EnvBuilder
from swe_envs.images import Images
from swe_envs.sandbox import Sandbox
from tests.support.scripted_server import Reply, ScriptedServer
from tests.swe_envs.envs.bad_repos import NO_BUILD

pytestmark = pytest.mark.docker

_YAML_TEST = "import yaml\n\n\ndef test_load():\n    assert yaml.safe_load('a: 1') == {'a': 1}\n"
# tests need PyYAML; nothing says so (collect fails on the import)
NEEDS_YAML = LangRepo("python", {"tests/test_cfg.py": _YAML_TEST}, {}, {}, [], [])
# requirements.txt points at a vendored wheel that is not in the repository: pip fails the build
VENDORED = LangRepo("python", {"tests/test_cfg.py": _YAML_TEST,
                               "requirements.txt": "./vendor/PyYAML-6.0-cp311-cp311-linux_x86_64.whl\n"}, {}, {}, [], [])


def _builder(client, tmp_path: Path, llm_url: str | None = None, rounds: int = 3, model: str = "default"):
    cfg = SweEnvsConfig()
    cfg.build.refine_rounds = rounds
    llm = LLMClient(LLMConfig(base_url=llm_url, model=model, cache_dir=None, max_retries=0, timeout_s=600)) if llm_url else None
    return EnvBuilder(cfg, Images(client, cfg.build), Sandbox(client, cfg.sandbox), llm, tmp_path / "logs")


def _build(builder, tmp_path, spec, name):
    inst = make_repo(tmp_path / "repos", spec, name)
    return builder.build(inst["repo"], tmp_path / "repos" / "tests" / name, inst["base_commit"])


def _fresh(client, env):
    """Tests must exercise the loop, not the image cache left by an earlier session."""
    if env.ok and env.cached:
        client.images.remove(env.image, force=True)
        return True
    return False


def test_rule_fix_installs_the_missing_module(docker_ready, tmp_path):
    builder = _builder(docker_ready, tmp_path)
    env = _build(builder, tmp_path, NEEDS_YAML, "needs-yaml")
    if _fresh(docker_ready, env):
        env = _build(builder, tmp_path / "again", NEEDS_YAML, "needs-yaml")
    assert env.ok, env.reason
    stages = [(a.source, a.stage) for a in env.attempts]
    assert stages == [("template", "collect"), ("rule", "ok")]
    assert "No module named 'yaml'" in Path(env.attempts[0].log_path).read_text()
    # the distribution the import stands for, era-pinned like the rest, before the resolved-set freeze
    assert env.attempts[1].rule == "missing module"
    assert env.recipe[-2].startswith("uv pip install --python /opt/venv/bin/python --exclude-newer ")
    assert env.recipe[-2].endswith(" PyYAML") and env.recipe[-1].startswith("uv pip freeze")
    assert any(r.lower().startswith("pyyaml==") for r in env.resolved)


_SETUP_WITH_EXTRA = "from setuptools import setup\nsetup(name='profiled', py_modules=[], extras_require={'test': ['PyYAML']})\n"
_OLD_YAML_TEST = "import yaml\n\n\ndef test_old_yaml():\n    assert yaml.__version__.startswith('5.')\n"
PROFILED = LangRepo("python", {"setup.py": _SETUP_WITH_EXTRA, "tests/test_cfg.py": _OLD_YAML_TEST}, {}, {}, [], [])


def test_a_profile_gives_the_harness_date_extras_and_pins(docker_ready, tmp_path):
    """config.EnvProfile: the repository's `test` extra (PyYAML, named nowhere else) installed with it,
    pinned below 6, resolved at the profile's date instead of the commit's era; all recorded."""
    from swe_envs.config import EnvProfile
    builder = _builder(docker_ready, tmp_path)
    builder.cfg.build.profiles = [EnvProfile(repo="tests/profiled", resolve_at="2023-06-01", extras=["test"],
                                             requirements=["PyYAML<6"], source="a harness"),
                                  EnvProfile(repo="tests/profiled", versions=["9.9"], requirements=["PyYAML<5"])]
    env = _build(builder, tmp_path, PROFILED, "profiled")
    if _fresh(docker_ready, env):
        env = _build(builder, tmp_path / "again", PROFILED, "profiled")
    assert env.ok, env.reason
    assert [(a.source, a.stage) for a in env.attempts] == [("template", "ok")]  # no rule had to add PyYAML
    assert env.exclude_newer == "2023-06-01" and "--exclude-newer 2023-06-01T23:59:59Z" in env.recipe[0]
    assert env.recipe[0].endswith(" -e '.[test]' 'PyYAML<6'")
    assert env.profile == {"resolve_at": "2023-06-01", "extras": ["test"], "requirements": ["PyYAML<6"],
                           "sources": ["a harness"]}
    assert any(r.lower().startswith("pyyaml==5.") for r in env.resolved), env.resolved


def test_llm_revises_a_failing_build(docker_ready, tmp_path):
    server = ScriptedServer()
    url = server.start()
    reply = Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "content":
        "The wheel is not vendored; install it from the index:\n```sh\nuv pip install PyYAML pytest\n```"}}]})
    # twice: an image an earlier session built from the revised recipe is found only after the
    # LLM answered (round 2), and the fresh rebuild below asks it again
    server.script += [reply, reply]
    try:
        builder = _builder(docker_ready, tmp_path, url)
        env = _build(builder, tmp_path, VENDORED, "vendored")
        if _fresh(docker_ready, env):  # cached from an earlier session
            env = _build(builder, tmp_path / "again", VENDORED, "vendored")
    finally:
        server.stop()
    assert env.ok, env.reason
    assert [(a.source, a.stage) for a in env.attempts] == [("template", "build"), ("llm", "ok")]
    assert env.attempts[0].recipe[0].endswith(" -r requirements.txt")
    assert env.recipe == ["uv pip install PyYAML pytest"]
    prompt = server.received[-1]["messages"][-1]["content"]
    assert "-r requirements.txt" in prompt and "vendor/PyYAML" in prompt  # the error log went in
    assert Path(env.attempts[0].log_path).is_file()


def test_smollm2_cannot_fix_it_and_every_round_is_recorded(docker_ready, tmp_path, llm_server):
    builder = _builder(docker_ready, tmp_path, llm_server, rounds=2, model="smollm2")
    builder.cfg.build.llm_max_tokens = 64  # a CPU-bound 135M model: keep the test short
    builder.cfg.build.log_tail_chars = 800
    env = _build(builder, tmp_path, NO_BUILD, "nobuild-llm")
    assert not env.ok
    assert env.attempts[0].source == "template" and env.attempts[0].stage == "build"
    assert "NoSuchLibrary" in Path(env.attempts[0].log_path).read_text()
    # the endpoint was asked: either its recipe was built and failed too, or it was refused as-is
    llm_attempts = [a for a in env.attempts if a.source == "llm"]
    assert llm_attempts and all(not a.ok for a in llm_attempts)
    assert env.reason.startswith("environment did not build after")
    assert list((tmp_path / "logs").rglob("round2-llm.log"))


def test_changed_rules_are_a_new_environment_not_the_cached_one(docker_ready, tmp_path, monkeypatch):
    """An image verified under older rules/parsers is not reused once RULES_VERSION changes."""
    import swe_envs.envs.environment.builder as builder_mod

    builder = _builder(docker_ready, tmp_path)
    first = _build(builder, tmp_path, NEEDS_YAML, "rules-version")
    assert first.ok, first.reason
    again = _build(builder, tmp_path / "again", NEEDS_YAML, "rules-version")
    assert again.ok and again.cached  # same rules: the verified image is reused
    monkeypatch.setattr(builder_mod, "RULES_VERSION", builder_mod.RULES_VERSION + "-changed")
    fresh = _build(builder, tmp_path / "fresh", NEEDS_YAML, "rules-version")
    try:
        assert fresh.ok and not fresh.cached, fresh.attempts
        assert [a.source for a in fresh.attempts] != ["cache"]
    finally:
        docker_ready.images.remove(fresh.image, force=True)  # keyed by a version no one else uses


def test_cache_namespace_gives_its_own_toolchain_tag(docker_ready):
    cfg = SweEnvsConfig()
    default = Images(docker_ready, cfg.build).toolchain("python", cfg.toolchain("python"))
    cfg.build.cache_namespace = "test-namespace"
    spaced = Images(docker_ready, cfg.build).toolchain("python", cfg.toolchain("python"))
    try:
        assert default.ok and spaced.ok, (default.error, spaced.error)
        assert spaced.tag != default.tag and spaced.tag.startswith("swe-envs/toolchain-python:")
    finally:
        docker_ready.images.remove(spaced.tag)  # the tag only: the layers are the default image's
