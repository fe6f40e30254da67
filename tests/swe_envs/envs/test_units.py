"""Pieces that need no Docker: language detection, recipes, test plans, mirrors, patches, inputs."""

from __future__ import annotations

import json

import pytest

from samples.swe_envs.lang_repos import ALL, make_repo
from swe_envs.config import SweEnvsConfig
from swe_envs.diff import patch_paths
from swe_envs.docker_setup import apt_mirror
from swe_envs.envs import languages
from swe_envs.envs.environment.llm_recipe import extract_recipe
from swe_envs.envs.rules import rule_fix
from swe_envs.images import env_dockerfile, toolchain_dockerfile
from swe_envs.instance import read_instances
from swe_envs.paths import is_test_path
from swe_envs.repos import Snapshot, check_patches
from tests.swe_envs.envs.fixture_projects import SUREFIRE
from tests.swe_envs.envs.regen_fixtures import make_git


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("units")
    return {lang: (root / "repos" / "tests" / f"calc-{lang}", make_repo(root / "repos", spec))
            for lang, spec in ALL.items()}


@pytest.mark.parametrize("language", list(ALL))
def test_detection_recipe_and_plan(repos, language):
    path, inst = repos[language]
    snap = Snapshot(path, inst["base_commit"])
    assert languages.detect_language(snap) == language or (language == "c" and languages.detect_language(snap) == "c")
    plan = languages.test_plan(language, snap)
    expected_runner = {"python": "pytest-swebench", "javascript": "tap", "java": "junit-xml", "go": "go-test", "rust": "cargo",
                       "c": "ctest", "cpp": "ctest", "php": "phpunit", "ruby": "rspec"}[language]
    assert plan.runner == expected_runner
    assert isinstance(languages.recipe(language, snap), list)
    # the test-path heuristic splits the instance's patches the way the repos were written
    assert all(is_test_path(p) for p in patch_paths(inst["test_patch"]))
    assert not any(is_test_path(p) for p in patch_paths(inst["patch"]))


def test_manifest_driven_recipes(tmp_path):
    repo, head = make_git(tmp_path / "py", {"requirements.txt": "requests\n", "pyproject.toml": "[project]\nname='x'\n",
                                            "x/__init__.py": ""})
    # build tooling (setuptools) may be newer than the era on every line: any of them may build an sdist
    uv = ("uv pip install --python /opt/venv/bin/python --exclude-newer 2019-05-14T23:59:59Z"
          " --exclude-newer-package setuptools=2023-06-30 --exclude-newer-package wheel=2023-06-30")
    opts = languages.RecipeOptions("2019-05-14", "5.4")
    assert languages.recipe("python", Snapshot(repo, head), opts) == [
        f"{uv} -r requirements.txt", f"{uv} -e .",
        "python -c 'import pytest' 2>/dev/null || uv pip install --python /opt/venv/bin/python pytest",
        "uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt"]
    # setuptools-scm cannot read a version from an exported tree: the task's version stands in, for
    # the project alone; its requirements resolve without it (an sdist dependency using
    # setuptools-scm would take the project's version as its own: iniconfig 1.0.0 -> 0.1)
    repo, head = make_git(tmp_path / "scm", {"setup.py": "setup(use_scm_version=True, setup_requires=['setuptools_scm'])"})
    editable = uv
    got = languages.recipe("python", Snapshot(repo, head), opts)
    at = got.index(f"SETUPTOOLS_SCM_PRETEND_VERSION=5.4.0 {editable} --no-deps -e .")
    assert got[at + 1].endswith("> /tmp/swe-requires.txt")
    assert got[at + 2] == f"if [ -s /tmp/swe-requires.txt ]; then {editable} -r /tmp/swe-requires.txt; fi"
    assert sum("SETUPTOOLS_SCM_PRETEND_VERSION" in line for line in got) == 1
    # the rule for a setuptools-scm the manifest did not show splits the install the same way
    plain = [f"{editable} -e .", "uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt"]
    fixed, rule = rule_fix("python", plain, "LookupError: setuptools-scm was unable to detect version for /testbed")
    assert fixed[0] == f"SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 {editable} --no-deps -e ." and fixed[-1] == plain[-1]
    assert len(fixed) == 4
    repo, head = make_git(tmp_path / "js", {"package.json": json.dumps({"devDependencies": {"jest": "^29"},
                                                                       "scripts": {"test": "jest"}})})
    snap = Snapshot(repo, head)
    assert languages.recipe("javascript", snap)[-1] == "npm install --no-audit --no-fund"
    # without a lockfile, only what had been published by the era's date
    assert languages.recipe("javascript", snap, opts)[-1] == "npm install --no-audit --no-fund --before=2019-05-14"
    assert languages.test_plan("javascript", snap).runner == "jest"
    assert "--verbose" in languages.test_plan("javascript", snap).command
    repo, head = make_git(tmp_path / "mvn", SUREFIRE.files)
    snap = Snapshot(repo, head)
    assert languages.detect_language(snap) == "java"
    assert languages.test_plan("java", snap).runner == "surefire"
    assert any("maven-repo" in c for c in languages.recipe("java", snap))
    repo, head = make_git(tmp_path / "go", {"go.mod": "module m\n", "a/b_test.go": "package b\n", "c.go": "package m\n"})
    assert languages.test_plan("go", Snapshot(repo, head), ["a/b_test.go"]).command == "go test -json -count=1 ./a"
    repo, head = make_git(tmp_path / "rb", {"test/calc_test.rb": "", "lib/calc.rb": ""})
    assert languages.test_plan("ruby", Snapshot(repo, head)).runner == "minitest"
    repo, head = make_git(tmp_path / "mk", {"Makefile": "all:\n\ncheck:\n\t./t.sh\n", "a.c": ""})
    snap = Snapshot(repo, head)
    assert languages.detect_language(snap) == "c"
    assert languages.test_plan("c", snap).command == "make -j2 && make check"


def test_dockerfiles_share_the_prelude_and_c_cpp_share_an_image():
    cfg = SweEnvsConfig()
    files = {lang: toolchain_dockerfile(cfg.toolchain(lang)) for lang in ALL}
    preludes = {f.splitlines()[1] + f.splitlines()[2] for f in files.values()}
    assert len(preludes) == 1  # Docker's layer cache shares it between languages
    assert files["c"] == files["cpp"]
    env = env_dockerfile("swe-envs/toolchain-python:x", ["pip install -e ."])
    assert "RUN pip install -e ." in env and "COPY --chown=10001:10001 repo/ /testbed/" in env


def test_apt_mirror_deb822_and_one_line(tmp_path):
    d = tmp_path / "a" / "sources.list.d"
    d.mkdir(parents=True)
    (d / "debian.sources").write_text("Types: deb\n# comment\nURIs: http://mirror.example/debian\n"
                                      "Suites: bookworm bookworm-updates\nComponents: main\n\n"
                                      "Types: deb\nURIs: http://mirror.example/security\nSuites: bookworm-security\n")
    assert apt_mirror(roots=(str(tmp_path / "a"),)) == "http://mirror.example/debian"
    (tmp_path / "b" / "sources.list.d").mkdir(parents=True)
    (tmp_path / "b" / "sources.list").write_text("# x\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert apt_mirror(roots=(str(tmp_path / "b"),)) == "http://other.example/debian"
    assert apt_mirror().startswith("http")  # this machine's own sources


def test_patch_checks(repos):
    path, inst = repos["python"]
    assert check_patches(path, inst["base_commit"], [("test_patch", inst["test_patch"]), ("patch", inst["patch"])]) is None
    bad = inst["patch"].replace("return a + b\n", "return a * b\n")
    why = check_patches(path, inst["base_commit"], [("test_patch", inst["test_patch"]), ("patch", bad)])
    assert why.startswith("patch does not apply")
    # applying the gold patch twice fails: patches are checked in sequence
    assert check_patches(path, inst["base_commit"], [("patch", inst["patch"]), ("again", inst["patch"])])


def test_recipe_extraction_and_rules():
    reply = "Sure!\n```sh\n# install\nRUN apt-get install -y \\\n  python3-yaml\n$ pip install .\nFROM x\n```\nDone"
    assert extract_recipe(reply, 10) == ["apt-get install -y python3-yaml", "pip install ."]
    assert extract_recipe("apt-get install -y a\nmake", 1) == ["apt-get install -y a"]
    log = "E   ModuleNotFoundError: No module named 'yaml'\nNo module named 'dateutil'"
    uv = "uv pip install --python /opt/venv/bin/python --exclude-newer 2020-01-01T23:59:59Z"
    recipe = [f"{uv} pytest", "uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt"]
    # the era-pinned install of the distributions the import names stand for, before the freeze
    assert rule_fix("python", recipe, log) == ([recipe[0], f"{uv} PyYAML python-dateutil", recipe[1]], "missing module")
    assert rule_fix("python", [f"{uv} PyYAML"], "No module named 'yaml'") is None
    assert rule_fix("c", [], "No module named 'yaml'") is None
    assert rule_fix("javascript", [], "Error: Cannot find module 'chalk'") == (
        ["apt-get install -y --no-install-recommends node-chalk"], "missing module")


def test_read_instances_keeps_going(tmp_path):
    p = tmp_path / "i.jsonl"
    good = {"instance_id": "a", "repo": "o/r", "base_commit": "c", "patch": "p", "test_patch": "t"}
    p.write_text("\n".join([json.dumps(good), "{oops", "[1]", json.dumps(good), json.dumps({"instance_id": "b"})]) + "\n")
    ok, bad = read_instances(p)
    assert [i["instance_id"] for i in ok] == ["a"]
    assert [b["reason"].split(":")[0] for b in bad] == ["malformed JSON", "not a JSON object", "duplicate instance_id",
                                                        "missing field(s)"]


def test_config_file_matches_defaults():
    from core.config import load_config
    from tests.swe_envs.envs.conftest import ROOT

    assert load_config(SweEnvsConfig, ROOT / "configs" / "swe_envs.yaml") == SweEnvsConfig()


def test_era_dependency_rules_from_real_failures():
    """Rules read the failures real pytest 5.0 environments hit (uv's resolver, Python 3.9 imports)."""
    line = ("SETUPTOOLS_SCM_PRETEND_VERSION=5.0.0 uv pip install --python /opt/venv/bin/python "
            "--exclude-newer 2019-07-19T23:59:59Z -e .")
    deleted = ("error: No solution found when resolving dependencies\n  cause: Because there are no versions of "
               "atomicwrites and pytest==5.0.0 depends on atomicwrites>=1.0, ...\n\nhint: `atomicwrites` was filtered "
               "by `exclude-newer` to only include packages uploaded before 2019-07-19T23:59:59Z. The latest version "
               "satisfying the requirement is v1.4.1, published at 2022-07-08T18:31:40.459Z.")
    (fixed,), rule = rule_fix("python", [line], deleted)
    assert rule == "per-package cut-off"
    assert "--exclude-newer-package atomicwrites=2022-07-08T23:59:59Z --exclude-newer 2019-07-19" in fixed
    crash = ('Traceback (most recent call last):\n  File "/testbed/src/_pytest/_code/code.py", line 23, in <module>\n'
             '    import pluggy\n  File "/opt/venv/lib/python3.9/site-packages/importlib_metadata/__init__.py", '
             'line 179, in from_name\n    dists = resolver(name)\n  File "/usr/lib/python3.9/importlib/metadata.py",'
             ' line 487, in find_distributions\nAttributeError: \'str\' object has no attribute \'name\'\n')
    (fixed,), rule = rule_fix("python", [line], crash)
    assert rule == "package of the interpreter's era"  # Python 3.9 + 182 days
    assert "--exclude-newer-package importlib-metadata=2021-04-05T23:59:59Z" in fixed
    editable = "AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'"
    (fixed,), rule = rule_fix("python", [line], editable)
    assert rule == "PEP 660 backend" and "--exclude-newer-package setuptools=2023-06-30 -e ." in fixed
    assert rule_fix("python", [fixed], editable) is None  # applied once
