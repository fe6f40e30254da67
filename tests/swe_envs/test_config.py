"""Environment profiles (a dataset harness's environment per repository and task version)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from swe_envs.config import BuildConfig, EnvProfile, SweEnvsConfig


def test_profiles_apply_per_repository_and_version_and_merge():
    cfg = BuildConfig(profiles=[
        EnvProfile(repo="o/r", resolve_at="2024-07-01", extras=["test"], source="all"),
        EnvProfile(repo="o/r", versions=["3.0"], requirements=["jinja2<3.0"], source="3.0 pins"),
        EnvProfile(repo="o/r", versions=["3.0"], resolve_at="2023-01-01", extras=["test", "docs"]),
    ])
    got = cfg.profile("o/r", "3.0")
    assert got.resolve_at == "2023-01-01" and got.extras == ("test", "docs") and got.requirements == ("jinja2<3.0",)
    assert got.record()["sources"] == ["all", "3.0 pins", "o/r"]
    assert cfg.profile("o/r", "3.1").requirements == () and cfg.profile("o/r", None).resolve_at == "2024-07-01"
    assert cfg.profile("o/other", "3.0").record() == {}


def test_shipped_profile_is_sphinx_only_with_pins_for_3_0_to_4_4():
    build = SweEnvsConfig().build
    assert {p.repo for p in build.profiles} == {"sphinx-doc/sphinx"}
    assert "jinja2<3.0" in build.profile("sphinx-doc/sphinx", "4.4").requirements
    assert build.profile("sphinx-doc/sphinx", "5.0").requirements == ()  # Sphinx 5+ needs Jinja2 3
    assert build.profile("sphinx-doc/sphinx", "5.0").extras == ("test",)
    assert build.profile("pallets/flask", "2.3").record() == {}


@pytest.mark.parametrize("bad", [{"resolve_at": "July 2024"}, {"extras": ["test]; rm -rf /"]},
                         {"requirements": ["jinja2<3.0; rm -rf /"]}, {"requirements": ["$(id)"]}])
def test_bad_profiles_are_refused(bad):
    with pytest.raises(ValidationError):
        EnvProfile(repo="o/r", **bad)
