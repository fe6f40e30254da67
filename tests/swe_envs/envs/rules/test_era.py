"""Era-correct toolchain choice, without Docker: repositories are real git repos made here."""

from __future__ import annotations

import pytest

from swe_envs.config import SweEnvsConfig
from swe_envs.envs.rules import era
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

PY = SweEnvsConfig().toolchain("python")


def _choose(tmp_path, files, created_at=None, exclude=None, language="python"):
    repo, head = make_git(tmp_path, files)
    tc = SweEnvsConfig().toolchain(language)
    return era.choose(language, Snapshot(repo, head), tc.versions, tc.base_image, created_at, exclude)


@pytest.mark.parametrize("created_at,files,version", [
    (["2019-05-14T21:54:55Z"], {"setup.py": "setup(python_requires='>=3.5')"}, "3.9"),   # older than every version
    (["2022-06-15T17:39:53Z", "2022-10-08T06:20:42Z"], {"setup.py": ""}, "3.9"),        # 3.11 came out 2022-10-24
    (["2023-03-04T18:36:21Z"], {"pyproject.toml": "requires-python = '>=3.7'"}, "3.11"),
    (["2025-06-01T00:00:00Z"], {"x.py": ""}, "3.13"),
    # declared support caps the era: classifiers up to 3.11
    (["2025-06-01T00:00:00Z"], {"setup.cfg": "classifiers =\n  Programming Language :: Python :: 3.10\n"
                                             "  Programming Language :: Python :: 3.11\n"}, "3.11"),
    (["2025-06-01T00:00:00Z"], {"tox.ini": "[tox]\nenvlist = py38,py39\n"}, "3.9"),
    (["2025-06-01T00:00:00Z"], {".github/workflows/ci.yml": "python-version: ['3.8', '3.9', '3.10']\n"}, "3.9"),
])
def test_python_by_era_and_declared_support(tmp_path, created_at, files, version):
    choice = _choose(tmp_path, files, created_at)
    assert choice.version == version, choice.evidence
    assert choice.base_image == PY.versions[version]
    assert choice.evidence["date_source"] == "created_at" and choice.era_date == max(created_at)[:10]


def test_commit_date_without_instances_and_refinement_to_older(tmp_path):
    choice = _choose(tmp_path, {"x.py": ""})
    assert choice.evidence["date_source"] == "commit date" and choice.version == "3.13"
    older = _choose(tmp_path / "b", {"x.py": ""}, exclude={"3.11", "3.13"})
    assert older.version == "3.9" and older.evidence["excluded"] == ["3.11", "3.13"]
    log = "E   ImportError: cannot import name 'Mapping' from 'collections' (/usr/lib/python3.11/collections/__init__.py)"
    assert era.older_wanted(log) and era.older_wanted("ModuleNotFoundError: No module named 'distutils'")
    assert era.older_wanted("ModuleNotFoundError: No module named 'yaml'") is None


def test_compiled_languages_follow_declared_minimums(tmp_path):
    assert _choose(tmp_path / "g", {"go.mod": "module m\n\ngo 1.21\n"}, language="go").version == "1.24"
    assert _choose(tmp_path / "r", {"Cargo.toml": "[package]\nedition = '2021'\n"}, ["2023-01-01"],
                   language="rust").version == "1.63"
    # no evidence: the configured default image, whatever the date
    plain = _choose(tmp_path / "c", {"Cargo.toml": "[package]\nname = 'x'\n"}, ["2020-01-01"], language="rust")
    assert plain.version == "1.63" and plain.base_image == "local/debian:bookworm"
    c = _choose(tmp_path / "n", {"a.c": ""}, language="c")
    assert c.version is None and c.base_image == "local/debian:bookworm"
