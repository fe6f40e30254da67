"""pytest's report lines of every era, on real runs (fixtures/real/pytest-eras, README there): a pass,
a failure, a skipif, a skip at run time, a module skipped at import, an xfail, an xpass, and a
parametrized pair whose ids hold " " and " - "."""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_envs.envs.parsers import parse_log
from swe_envs.envs.validate.validator import check_run, skip_reasons
from swe_envs.sandbox import RunLog

ERAS = Path(__file__).parents[1] / "fixtures" / "real" / "pytest-eras"
VERSIONS = ["2.9.2", "3.0.7", "3.10.1", "4.6.11", "5.4.3", "6.2.5", "7.4.4", "8.3.5"]
EXPECTED = {
    "test_mix.py::test_ok": "passed", "test_mix.py::test_skipped": "skipped", "test_mix.py::test_fail": "failed",
    "test_xfail.py::test_xfail": "skipped", "test_xfail.py::test_xpass": "passed",
    "test_xfail.py::test_skip_at_run_time": "skipped", "test_xfail.py::test_param[a b]": "skipped",
    "test_xfail.py::test_param[c - d]": "passed",
}


@pytest.mark.parametrize("flags", ["rA", "rs"])
@pytest.mark.parametrize("version", VERSIONS)
def test_every_era_parses_to_the_same_statuses_and_passes_the_guards(version, flags):
    """pytest 2.x-3.x write an expected failure as "xfail" on its -v line (it was missed, so the
    skipped total fell short of the summary's and the run was refused); pytest 7 writes an XPASS
    reason after the id without " - " (it became a second, passing test)."""
    log = (ERAS / f"pytest-{version}-{flags}.log").read_text()
    assert f"pytest-{version}" in log
    res = parse_log("pytest", log)
    assert res.statuses == EXPECTED
    # xfailed counts as skipped, xpassed as passed; the module skipped at import has no test line
    assert res.counts == {"passed": 3, "failed": 1, "skipped": 5, "error": 0}
    assert res.located_skips >= 1
    assert check_run(RunLog(log, 1, False), res) is None
    assert check_run(RunLog(log, 0, False), res) is not None  # a failure with exit code 0: refused


@pytest.mark.parametrize("version", VERSIONS)
def test_skip_reasons_where_the_era_prints_them(version):
    """-rs names every skip with its reason ("SKIP [1]" before pytest 3.x's rename, "SKIPPED [1]" after)."""
    reasons = skip_reasons([(ERAS / f"pytest-{version}-rs.log").read_text()], top=10)
    assert "1 x 'not here'" in reasons and "decided at run time" in reasons


@pytest.mark.parametrize("version", ["6.2.5", "7.4.4", "8.3.5"])
def test_swebench_ids_of_xfail_and_xpass(version):
    """SWE-bench's harness ignores XPASS lines and counts XFAIL as no pass: neither enters its lists."""
    res = parse_log("pytest-swebench", (ERAS / f"pytest-{version}-rA.log").read_text())
    assert "test_xfail.py::test_xpass" not in res.statuses
    assert res.statuses["test_xfail.py::test_xfail"] == "skipped"
    assert res.statuses["test_mix.py::test_ok"] == "passed"


def test_the_datasets_ids_are_the_newest_pytests(tmp_path):
    """sphinx 3.1's test_unparse repeats the id 1234-1234: pytest 5.4 (the era's, which the recipe installed)
    suffixes it 12340/12341, pytest 8 writes 1234_0/1234_1 as SWE-bench's lists do (its harness installs pytest
    unpinned); the rest of the run is the same. So the recipe installs the newest pytest, without the era's
    cut-off, where the repository gives none."""
    from swe_envs.envs import languages
    from swe_envs.repos import Snapshot
    from tests.swe_envs.envs.regen_fixtures import make_git

    real = Path(__file__).parents[1] / "fixtures" / "real" / "sphinx"
    old = parse_log("pytest-swebench", (real / "sphinx-7462-after-pytest5.log").read_text()).statuses
    new = parse_log("pytest-swebench", (real / "sphinx-7462-after-pytest8.log").read_text()).statuses
    ast = "tests/test_pycode_ast.py::test_unparse"
    rename = {f"{ast}[1234-12340]": f"{ast}[1234-1234_0]", f"{ast}[1234-12341]": f"{ast}[1234-1234_1]"}
    assert old[f"{ast}[1234-12340]"] == new[f"{ast}[1234-1234_0]"] == "passed"
    assert {rename.get(k, k): v for k, v in old.items()} == new
    repo, head = make_git(tmp_path / "p", {"setup.py": "from setuptools import setup\nsetup(name='p')\n"})
    recipe = languages.recipe("python", Snapshot(repo, head), languages.RecipeOptions("2020-04-12", "3.1"))
    assert "python -c 'import pytest' 2>/dev/null || uv pip install --python /opt/venv/bin/python pytest" in recipe
