"""Validation rules on real logs: a before-run stopped at collection by the new tests, test files a patch deletes."""

from __future__ import annotations

from pathlib import Path

from swe_envs.envs.parsers import parse_log
from swe_envs.envs.validate.validator import check_run, new_tests_uncollectable, touched_tests
from swe_envs.sandbox import RunLog

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "release-pairs"


def _patch(*files: tuple[str, str]) -> str:
    out = []
    for path, kind in files:
        if kind == "deleted":
            out.append(f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
        elif kind == "new":
            out.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n")
        else:
            out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+y\n")
    return "".join(out)


# toolz 0.10.0's new tests import compose_left and peekn, which only the release adds (a real log of
# its before-run: pytest 8.4, "Interrupted: 2 errors during collection", exit code 2)
TOOLZ_TESTS = _patch(("toolz/tests/test_functoolz.py", "m"), ("toolz/tests/test_itertoolz.py", "m"),
                     ("toolz/tests/test_curried.py", "m"))


def test_a_before_run_stopped_by_the_new_tests_counts_every_test_as_failing():
    log = (REAL / "toolz-0.10.0-before.log").read_text()
    run, parsed = RunLog(log, 2, False), parse_log("pytest-swebench", log)
    assert check_run(run, parsed)  # by the general guards, a run that cannot be trusted
    assert new_tests_uncollectable("pytest-swebench", run, parsed, {"test_patch": TOOLZ_TESTS})


def test_a_collection_error_outside_the_test_patch_is_still_a_broken_run():
    log = (REAL / "toolz-0.10.0-before.log").read_text()
    parsed = parse_log("pytest-swebench", log)
    only_one = {"test_patch": _patch(("toolz/tests/test_functoolz.py", "m"))}  # test_itertoolz.py broke too
    assert not new_tests_uncollectable("pytest-swebench", RunLog(log, 2, False), parsed, only_one)
    full = {"test_patch": TOOLZ_TESTS}
    assert not new_tests_uncollectable("pytest-swebench", RunLog(log, 1, False), parsed, full)  # not pytest's 2
    assert not new_tests_uncollectable("pytest-swebench", RunLog(log, 2, True), parsed, full)   # timed out
    assert not new_tests_uncollectable("cargo", RunLog(log, 2, False), parsed, full)


def test_a_run_where_the_environment_lacks_a_module_is_not_excused_after_the_fix():
    # packaging 19.1's after-run: its new tests import attr, which the environment of 19.0 lacks
    log = (REAL / "packaging-19.1-after.log").read_text()
    run, parsed = RunLog(log, 2, False), parse_log("pytest-swebench", log)
    assert check_run(run, parsed) and "No module named 'attr'" in log


def test_files_the_test_patch_deletes_are_not_run():
    patch = _patch(("markupsafe/tests.py", "deleted"), ("tests.py", "new"), ("tests/test_a.py", "m"), ("setup.py", "m"))
    assert touched_tests(patch) == ["tests.py", "tests/test_a.py"]
