"""A program the tests skip without: its Debian package, once (real sphinx 7.2 collect run)."""

from __future__ import annotations

from pathlib import Path

from swe_envs.envs.rules import rule_fix
from swe_envs.envs.rules.system_tools import missing_tools

REAL = Path(__file__).parents[1] / "fixtures" / "real"
RECIPE = ["uv pip install --python /opt/venv/bin/python -e .", "uv pip freeze > /opt/swe-resolved.txt"]


def test_graphviz_skips_of_a_real_sphinx_run_install_graphviz_once():
    """sphinx 7.2 at its environment commit (SWE-bench sphinx-doc__sphinx-10614's repo-version): 5 tests
    skip with 'graphviz "dot" is not available', the fix's test among them; the run parsed, so the
    environment was verified without dot and the instance had no FAIL_TO_PASS test."""
    log = (REAL / "sphinx" / "sphinx-7.2-collect.log").read_text()
    assert missing_tools(log, RECIPE) == ["graphviz"]
    recipe, rule = rule_fix("python", RECIPE, log)
    assert rule == "system tool"
    assert recipe == RECIPE + ["apt-get install -y --no-install-recommends graphviz || true"]
    # tried once: a mirror without the package never costs the environment another round
    assert missing_tools(log, recipe) == [] and rule_fix("python", recipe, log) is None


def test_skips_that_name_no_program_install_nothing():
    for name in ("pytest-eras/pytest-6.2.5-rA.log", "pytest-eras/pytest-2.9.2-rs.log", "sphinx/sphinx-7462-before.log"):
        assert missing_tools((REAL / name).read_text(), RECIPE) == [], name
    assert missing_tools("SKIPPED [2] t.py:3: requires Python 3.12\n", RECIPE) == []
    assert missing_tools("SKIPPED [1] t.py:3: 'git' is not installed\n", RECIPE) == ["git"]
