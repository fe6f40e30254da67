"""The one cache rule: $GLM5_RECIPE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/glm5-recipe."""

import subprocess
import sys
from pathlib import Path

from core.cache import ENV, cache_dir, cache_field
from core.config import StrictModel

ROOT = Path(__file__).resolve().parents[2]


def test_the_env_var_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"


def test_a_relative_env_var_is_made_absolute_where_the_job_starts(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "rel")
    monkeypatch.chdir(tmp_path)
    assert cache_dir() == tmp_path / "rel"


def test_xdg_cache_home_then_the_home_default(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "glm5-recipe"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for unset in ("", "relative/xdg"):  # the XDG spec: a relative value is ignored
        monkeypatch.setenv("XDG_CACHE_HOME", unset)
        assert cache_dir() == tmp_path / "home" / ".cache" / "glm5-recipe"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "glm5-recipe"


def test_an_explicit_directory_overrides_the_rule(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "env"))
    assert cache_dir(tmp_path / "given") == tmp_path / "given"
    assert cache_dir(None) == cache_dir("") == tmp_path / "env"


def test_a_config_default_follows_the_environment_when_built(tmp_path, monkeypatch):
    class Cfg(StrictModel):
        data_dir: str = cache_field()
        llm: str | None = cache_field("llm_cache")

    monkeypatch.setenv(ENV, str(tmp_path / "a"))
    first = Cfg()
    monkeypatch.setenv(ENV, str(tmp_path / "b"))
    assert first.data_dir == str(tmp_path / "a") and Cfg().llm == str(tmp_path / "b" / "llm_cache")
    assert Cfg(data_dir="/srv/cache").data_dir == "/srv/cache"


def test_python_m_core_cache_prints_it_from_any_directory(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), ENV: str(tmp_path / "c")}
    run = [sys.executable, "-m", "core.cache"]
    res = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == str(tmp_path / "c")
    res = subprocess.run([*run, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0 and ENV in res.stdout and "XDG_CACHE_HOME" in res.stdout
