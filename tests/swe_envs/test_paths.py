"""One test/source rule for mining (a patch's test/code split) and environments (touched tests)."""

import subprocess

import pytest

from swe_envs.envs import languages
from swe_envs.paths import is_source_path, is_test_path
from swe_envs.repos import Snapshot


def test_a_python_environment_runs_the_test_files_mining_splits_off(tmp_path):
    # pytest keeps its tests in testing/ (SWE-bench pytest-dev__pytest-5631 touches only
    # testing/python/integration.py): mining calls it a test, so validation runs it
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    touched = ["testing/python/integration.py", "testing/conftest.py", "testing/data/x.json", "src/_pytest/python.py"]
    selected = [p for p in touched if is_test_path(p)]
    assert selected == touched[:3]
    plan = languages.test_plan("python", Snapshot(tmp_path, "HEAD"), selected)
    assert plan.command.endswith(" testing/python/integration.py") and "x.json" not in plan.command


def test_non_code_files_in_test_directories_are_tests():
    assert is_test_path("tests/CMakeLists.txt") and is_test_path("src/test/resources/data.json")
    assert is_test_path("benches/speed.rs") and is_test_path("src/unittest/runner_test.cc")
    assert not is_test_path("src/pkg/mod.py") and not is_test_path("docs/testing.md")


@pytest.mark.parametrize(
    "path, is_test",
    [
        ("tests/test_x.py", True),
        ("pkg/test_x.py", True),
        ("pkg/x_test.py", True),
        ("conftest.py", True),
        ("x/y_test.go", True),
        ("src/app.test.ts", True),
        ("src/app.spec.jsx", True),
        ("__tests__/a.js", True),
        ("src/test/java/a/FooTest.java", True),
        ("src/main/java/a/Foo.java", False),
        ("lib/foo_spec.rb", True),
        ("spec/models/user.rb", True),
        ("tests/FooTest.php", True),
        ("Foo.Tests/Bar.cs", True),
        ("src/Bar.cs", False),
        ("foo/bar_unittest.cc", True),
        ("tests/integration.rs", True),
        ("src/lib.rs", False),
        ("test/foo_test.exs", True),
        ("pkg/testing_utils.py", False),
        ("contest/rank.py", False),
        ("src/protest.js", False),
    ],
)
def test_test_path_heuristics(path, is_test):
    assert is_test_path(path) is is_test


def test_source_paths():
    assert is_source_path("a/b.py") and is_source_path("x.tsx") and is_source_path("Makefile") is False
    assert (
        not is_source_path("README.md")
        and not is_source_path("CHANGELOG.rst")
        and not is_source_path("data.csv")
    )
