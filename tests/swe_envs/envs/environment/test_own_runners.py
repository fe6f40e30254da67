"""A repository's own test runner and the dataset's test ids, on real runner output.

Logs and files come from real runs (fixtures/real/README.md): Debian's sympy 1.11.1 under its
own ``bin/test`` and under pytest, and pytest 3.0 / 4.6 / 6.2 over a project with a module
skipped at import. No Docker here: the logs were recorded once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import UserError
from swe_envs.envs.environment import own_runners
from swe_envs.envs.languages import TestPlan as Plan
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.parsers.test_ids import map_ids, scheme_for
from swe_envs.envs.validate.validator import check_run
from swe_envs.repos import Snapshot
from swe_envs.sandbox import RunLog
from tests.swe_envs.envs.regen_fixtures import make_git

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def _rc(log: str) -> int:
    return int(log.rstrip().rsplit("rc=", 1)[1])


def test_sympy_bin_test_log_parses_with_its_own_ids():
    log = (REAL / "sympy" / "bin-test.log").read_text()
    res = parse_log("sympy", log)
    assert res.summary_seen and res.counts == {"passed": 58, "failed": 0, "skipped": 7, "error": 0}
    assert res.tally() == res.counts  # skips with a reason ("numpy not installed. s") and xfails ("f")
    assert res.statuses["test_symbols"] == "passed" and res.statuses["test_disambiguate"] == "passed"
    assert res.statuses["test_issue_16772"] == "skipped" and res.statuses["test_issue_10295"] == "skipped"
    assert check_run(RunLog(log, _rc(log), False), res) is None
    # cut before the summary: the suite did not run to its end
    cut = log[: log.index("sympy/core/tests/test_sympify.py")]
    assert "summary line is missing" in check_run(RunLog(cut, 0, False), parse_log("sympy", cut))
    assert parse_log("auto", log).runner == "sympy"


def test_sympy_failures_and_exceptions():
    log = (REAL / "sympy" / "bin-test-fail.log").read_text()
    res = parse_log("sympy", log)
    assert res.statuses["test_added_failure"] == "failed" and res.statuses["test_added_exception"] == "error"
    assert res.statuses["test_symbols"] == "passed"
    assert res.counts["failed"] == 1 and res.counts["error"] == 1 and res.tally() == res.counts
    assert _rc(log) != 0 and check_run(RunLog(log, _rc(log), False), res) is None


def test_pytest_ids_map_to_the_bare_names_bin_test_prints():
    """SWE-bench's sympy lists hold bin/test's names: pytest's node ids of the same run map onto them."""
    assert scheme_for("sympy/sympy") == "bare-name" and scheme_for("pytest-dev/pytest") == "native"
    ours = map_ids("bare-name", parse_log("pytest-swebench", (REAL / "sympy" / "pytest.log").read_text()))
    theirs = parse_log("sympy", (REAL / "sympy" / "bin-test.log").read_text()).statuses
    passed = lambda d: {t for t, s in d.items() if s == "passed"}  # noqa: E731
    assert passed(ours) == passed(theirs) and len(passed(ours)) == 58
    fail_ours = map_ids("bare-name", parse_log("pytest-swebench", (REAL / "sympy" / "pytest-fail.log").read_text()))
    fail_theirs = parse_log("sympy", (REAL / "sympy" / "bin-test-fail.log").read_text()).statuses
    assert passed(fail_ours) == passed(fail_theirs)
    assert {"test_added_failure", "test_added_exception"} <= set(fail_ours) - passed(fail_ours)
    # a user's scheme overrides the table; an unknown one is a clear error
    assert scheme_for("sympy/sympy", {"sympy/sympy": "native"}) == "native"
    with pytest.raises(UserError, match="unknown test id scheme"):
        scheme_for("a/b", {"a/b": "nope"})


def test_pytest_options_scheme_shortens_path_parameters():
    from swe_envs.envs.parsers.base import ParseResult

    res = ParseResult("pytest", {"t.py::test_a[/tmp/pytest-of-x/pytest-0/f.txt]": "passed", "t.py::test_b[1-2]": "failed",
                                 "t.py::test_c[//net]": "passed"})
    assert map_ids("pytest-options", res) == {"t.py::test_a[/f.txt]": "passed", "t.py::test_b[1-2]": "failed",
                                              "t.py::test_c[//net]": "passed"}


def test_bare_names_of_two_tests_keep_the_worst_status():
    from swe_envs.envs.parsers.base import ParseResult

    res = ParseResult("pytest", {"a/test_x.py::test_same": "passed", "b/test_y.py::test_same": "failed"})
    assert map_ids("bare-name", res) == {"test_same": "failed"}


@pytest.mark.parametrize("name", ["pytest-3.0.7-rA", "pytest-3.0.7-rs", "pytest-4.6.11-rA", "pytest-4.6.11-rs",
                                  "pytest-6.2.5-rA", "pytest-6.2.5-rs"])
def test_module_level_skips_of_every_pytest_era(name):
    """A module skipped at import has no test line; the summary's skipped total counts it. The
    header's collected-skips and the SKIP/SKIPPED summary lines account for it (the guard used to
    refuse such runs as disagreeing with the runner's summary)."""
    log = (REAL / "pytest-skips" / f"{name}.log").read_text()
    res = parse_log("pytest", log)
    assert res.counts == {"passed": 1, "failed": 1, "skipped": 2, "error": 0}
    assert res.tally() == {"passed": 1, "failed": 1, "skipped": 1, "error": 0}
    assert res.located_skips >= 1
    assert check_run(RunLog(log, 1, False), res) is None
    # a pass the parse missed is still a disagreement: skips never excuse passes or failures
    dropped = log.replace("test_mix.py::test_ok PASSED", "").replace("PASSED test_mix.py::test_ok", "")
    assert "disagrees" in check_run(RunLog(dropped, 1, False), parse_log("pytest", dropped))


def test_own_runner_found_in_real_trees(tmp_path):
    bin_test = (REAL / "sympy" / "bin-test.py.txt").read_text()
    repo, head = make_git(tmp_path / "sympy", {"bin/test": bin_test, "setup.py": "",
                                               "sympy/core/tests/test_symbol.py": "def test_symbols(): pass\n"})
    snap = Snapshot(repo, head)
    assert own_runners.find(snap) == "bin/test"
    plan = own_runners.plan("bin/test", snap, ["sympy/core/tests/test_symbol.py", "sympy/conftest.py"])
    assert plan.runner == "sympy"
    assert plan.command == "python bin/test --verbose -C sympy/core/tests/test_symbol.py"
    # Django's runner: app labels from test files, from inside tests/
    repo, head = make_git(tmp_path / "django", {
        "tests/runtests.py": "import django\nparser.add_argument('--parallel')\n", "setup.py": "",
        "tests/model_fields/test_charfield.py": "", "tests/queries/tests.py": ""})
    snap = Snapshot(repo, head)
    assert own_runners.find(snap) == "django"
    plan = own_runners.plan("django", snap, ["tests/model_fields/test_charfield.py", "tests/queries/tests.py"])
    assert plan == Plan(
        "cd tests && python runtests.py --verbosity 2 --parallel 1 model_fields.test_charfield queries.tests", "django")
    # a tox [testenv] that runs pytest (sphinx 3.x's) is no other runner: pytest failed already
    tox = ("[tox]\nenvlist = py39\n\n[testenv]\nextras =\n    test\nsetenv =\n    PYTHONWARNINGS = all\n"
           "    PYTEST_ADDOPTS = {env:PYTEST_ADDOPTS:} --color yes\ncommands=\n"
           "    du16: pip install docutils\n    python -X dev -m pytest --durations 25 {posargs}\n")
    repo, head = make_git(tmp_path / "tox", {"tox.ini": tox, "setup.py": "", "Makefile": "test:\n\tpytest\n"})
    assert own_runners.find(Snapshot(repo, head)) is None
    # one that runs something else: its setenv and commands, {posargs} the chosen files
    other = tox.replace("python -X dev -m pytest --durations 25 {posargs}", "python tests/run.py {posargs}")
    repo, head = make_git(tmp_path / "tox2", {"tox.ini": other, "setup.py": ""})
    snap = Snapshot(repo, head)
    assert own_runners.find(snap) == "tox"
    assert own_runners.plan("tox", snap, ["tests/test_a.py"]).command == (
        "export PYTHONWARNINGS=all; export PYTEST_ADDOPTS=' --color yes'; python tests/run.py tests/test_a.py")
    repo, head = make_git(tmp_path / "make", {"Makefile": "all:\n\techo\ntest:\n\tpython -m unittest\n"})
    assert own_runners.find(Snapshot(repo, head)) == "make"
    repo, head = make_git(tmp_path / "none", {"setup.py": "", "tests/test_a.py": ""})
    assert own_runners.find(Snapshot(repo, head)) is None


def test_sample_projects_a_conftest_ignores_are_no_test_files(tmp_path):
    """sphinx 7.2 (SWE-bench sphinx-doc__sphinx-10614): the test patch touches tests/roots/<project>/*.py,
    sample projects its tests/conftest.py keeps out (``collect_ignore = ['roots']``); given to pytest
    by name they were imported as test modules and the collection broke (``from test import Alice``)."""
    from swe_envs.envs import languages

    repo, head = make_git(tmp_path / "sphinx", {
        "setup.py": "", "tests/conftest.py": "pytest_plugins = 'x'\n\n# roots\ncollect_ignore = ['roots']\n",
        "tests/roots/test-ext/subdir/other.py": "from test import Alice\n", "tests/roots/test-ext/test.py": "",
        "tests/test_ext.py": "def test_a(): pass\n", "tests/rootsy/test_b.py": ""})
    snap = Snapshot(repo, head)
    touched = ["tests/roots/test-ext/subdir/other.py", "tests/roots/test-ext/test.py", "tests/test_ext.py",
               "tests/rootsy/test_b.py"]
    assert languages.test_plan("python", snap, touched).command.endswith(" tests/test_ext.py tests/rootsy/test_b.py")


@pytest.mark.parametrize("name,rc,counts", [
    ("runtests", 0, {"passed": 99, "failed": 0, "skipped": 4, "error": 0}),
    ("runtests-fail", 1, {"passed": 56, "failed": 1, "skipped": 2, "error": 1})])
def test_django_runner_ids_are_its_descriptions(name, rc, counts):
    """Django's runner prints a test's docstring line where it has one, and SWE-bench keys tests by
    that text; tests sharing one collapse to one id, so the guards count every reported line."""
    log = (REAL / "django" / f"{name}.log").read_text()
    res = parse_log("django", log)
    assert res.counts == counts and res.guard.tally() == counts
    if not rc:  # shared docstring lines (basic + get_or_create): fewer ids than tests
        assert len(res.statuses) < sum(counts.values())
    assert res.statuses["You can leave off the value for an AutoField when creating an"] == "passed"
    assert check_run(RunLog(log, rc, False), res) is None
    assert parse_log("auto", log).runner == "django"
    if rc:
        assert res.statuses["test_added_failure (basic.tests.AddedTests.test_added_failure)"] == "failed"
        assert res.statuses["test_added_error (basic.tests.AddedTests.test_added_error)"] == "error"
        assert check_run(RunLog(log, 0, False), res) is not None  # failures with exit code 0: refused


@pytest.mark.parametrize("name", ["pytest-3.0.7-rs", "pytest-6.2.5-rA"])
def test_a_failure_names_the_skip_reasons_of_every_era(name):
    from swe_envs.envs.validate.validator import skip_reasons

    log = (REAL / "pytest-skips" / f"{name}.log").read_text()
    reasons = skip_reasons([log])
    assert "1 x 'not here'" in reasons and "no_such_module_here" in reasons
    assert skip_reasons([]) == "" and skip_reasons(["no skips\n"]) == ""


def test_a_passing_id_holding_a_dash_is_one_test():
    """Real sphinx run: ``PASSED tests/test_pycode_ast.py::test_unparse[a - b-a - b]`` was cut at " - "
    (only failures carry " - reason") and counted twice: 66 parsed against the summary's 65."""
    log = (REAL / "sphinx" / "sphinx-7462-before.log").read_text()
    res = parse_log("pytest", log)
    assert res.statuses["tests/test_pycode_ast.py::test_unparse[a - b-a - b]"] == "passed"
    assert res.tally() == res.counts == {"passed": 65, "failed": 2, "skipped": 0, "error": 0}
    assert check_run(RunLog(log, 1, False), parse_log("pytest-swebench", log)) is None
