"""Python's test plan: which files the suite's pytest command names."""

from __future__ import annotations

from swe_envs.envs.languages.python import plan
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git


def _plan(tmp_path, files: dict[str, str]) -> str:
    repo, head = make_git(tmp_path, files)
    return plan(Snapshot(repo, head), []).command


def test_a_suite_pytest_collects_by_default_is_not_named(tmp_path):
    cmd = _plan(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "tests/test_a.py": "def test_a(): pass\n"})
    assert cmd.endswith("--color=no")


def test_nose_era_test_files_are_named(tmp_path):
    """itsdangerous 0.24's tests.py and tqdm 4.45's tqdm/tests/tests_*.py: nose found them, pytest does not."""
    cmd = _plan(tmp_path, {"setup.py": "", "tqdm/__init__.py": "", "tqdm/tests/tests_main.py": "def test_x(): pass\n",
                           "tqdm/tests/tests_perf.py": "def test_y(): pass\n", "tests.py": "def test_z(): pass\n",
                           "tqdm/tests/helpers.py": ""})
    assert cmd.split("--color=no")[1].split() == ["tests.py", "tqdm/tests/tests_main.py", "tqdm/tests/tests_perf.py"]


# --- a dataset harness's extras and pins (config.EnvProfile) in the install lines ---

def _recipe(tmp_path, files: dict[str, str], **opts) -> list[str]:
    from swe_envs.envs.languages.base import RecipeOptions
    from swe_envs.envs.languages.python import recipe
    repo, head = make_git(tmp_path, files)
    return recipe(Snapshot(repo, head), RecipeOptions("2024-07-01", "3.5", **opts))


def test_profile_extras_and_pins_resolve_with_the_repository(tmp_path):
    got = _recipe(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n"},
                  extras=("test", "docs"), requirements=("jinja2<3.0", "markupsafe<=2.0.1"))
    assert got[0].endswith("--exclude-newer 2024-07-01T23:59:59Z -e '.[test,docs]' 'jinja2<3.0' 'markupsafe<=2.0.1'")
    plain = _recipe(tmp_path / "plain", {"setup.py": "from setuptools import setup\nsetup(name='x')\n"})
    assert plain[0].endswith("T23:59:59Z -e .")


def test_profile_with_setuptools_scm_installs_the_extras_requirements(tmp_path):
    from swe_envs.envs.rules.python import python_rules
    scm = {"setup.py": "from setuptools import setup\nsetup(use_scm_version=True, setup_requires=['setuptools_scm'])\n"}
    got = _recipe(tmp_path, scm, extras=("test",), requirements=("jinja2<3.0",))
    assert got[0].startswith("SETUPTOOLS_SCM_PRETEND_VERSION=3.5.0 ") and got[0].endswith(" --no-deps -e .")
    assert "(?:test)" in got[1] and got[2].endswith("-r /tmp/swe-requires.txt 'jinja2<3.0'; fi")
    # the rule for a version setuptools-scm could not read keeps a profile's extras and pins too
    line = "uv pip install --python /opt/venv/bin/python -e '.[test]' 'jinja2<3.0'"
    fixed = python_rules([line], "LookupError: setuptools-scm was unable to detect version for /testbed")
    assert fixed is not None and fixed[0][0] == "SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 uv pip install --python " \
        "/opt/venv/bin/python --no-deps -e ." and "(?:test)" in fixed[0][1] and fixed[0][2].endswith(" 'jinja2<3.0'; fi")


def test_extras_requirements_snippet_on_real_metadata(tmp_path):
    """The snippet in a real shell and interpreter, over an installed distribution's metadata: an
    extra's requirements (alone or with another marker) lose that marker, other extras' keep theirs."""
    import json
    import subprocess
    import sys

    from swe_envs.envs.languages.python import testbed_requires
    info = tmp_path / "site" / "proj-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: proj\nVersion: 1.0\nRequires-Dist: docutils>=0.12\n"
        "Requires-Dist: pytest ; extra == 'test'\nRequires-Dist: typed-ast ; (python_version < \"3.8\") and extra == \"test\"\n"
        "Requires-Dist: flake8 ; extra == \"lint\"\n")
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///testbed", "dir_info": {"editable": True}}))
    out = tmp_path / "requires.txt"
    cmd = testbed_requires(("test",)).replace("/tmp/swe-requires.txt", str(out)).replace("python -c", f"{sys.executable} -c", 1)
    subprocess.run(["sh", "-c", cmd], check=True, env={"PYTHONPATH": str(tmp_path / "site")})
    assert out.read_text().splitlines() == ["docutils>=0.12", "pytest", 'typed-ast ; (python_version < "3.8")',
                                            'flake8 ; extra == "lint"']
