"""LLM-written parsers checked on a real suite of hundreds of tests: a sampled single-test truth plus the
runner's own summary counts (llm_parser.SampledTruth).

The suite is CPython's own (test.test_json + test.test_textwrap of the interpreter running the tests:
234 tests, one skipped), run for real with `python -m unittest -v`; the single-test truth is the exit code
of eight of its tests each run alone, on the host — the stdlib's own tests, not untrusted code. The
candidates stand for the LLM's answers (a scripted reply, as SmolLM2 cannot be made to write a known
parser); they run in the jail like any candidate."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from swe_envs.config import LLMParserConfig
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.parsers.llm import SampledTruth, check_parser, pick_single_tests

MODULES = ["test.test_json", "test.test_textwrap"]
# the stdlib suite passes whole here, so the sample has no failing test: the runner's counts are what
# tell a vacuous parser from a right one
CFG = LLMParserConfig(min_truth_failing=0, timeout_s=20)

GOOD = r'''
import re
def parse(log):
    tests = {}
    for m in re.finditer(r"^(?:\w+ \(([\w.]+)\)|Doctest: ([\w.]+)) \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure)$",
                         log, re.M):
        status = {"ok": "passed", "FAIL": "failed", "ERROR": "error"}.get(m[3], "skipped")
        name, n = m[1] or m[2], 1
        while (name if n == 1 else f"{name}#{n}") in tests:  # the same doctest runs for the C and Python modules
            n += 1
        tests[name if n == 1 else f"{name}#{n}"] = status
    ran = re.search(r"^Ran (\d+) tests? in", log, re.M)
    if not ran:
        return {"tests": tests, "summary": None}
    end = re.search(r"^(OK|FAILED)(?: \((.*)\))?$", log, re.M)
    extra = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", end[2] or "")) if end else {}
    failed, errors, skipped = extra.get("failures", 0), extra.get("errors", 0), extra.get("skipped", 0)
    return {"tests": tests, "summary": {"passed": int(ran[1]) - failed - errors - skipped, "failed": failed,
                                        "error": errors, "skipped": skipped}}
'''
# drops the textwrap module's tests and says the totals are what it found
DROPS_A_MODULE = GOOD.replace('    ran = re.search', '    tests = {k: v for k, v in tests.items() if "textwrap" not in k}\n'
                              '    ran = re.search').replace(
    '"summary": {"passed": int(ran[1]) - failed - errors - skipped',
    '"summary": {"passed": sum(v == "passed" for v in tests.values())')
# every test passed, totals made up to match
ALL_PASSED = r'''
import re
def parse(log):
    tests = {m[1]: "passed" for m in re.finditer(r"\(([\w.]+)\) \.\.\. ", log)}
    return {"tests": tests, "summary": {"passed": len(tests), "failed": 0, "skipped": 0, "error": 0}}
'''


@pytest.fixture(scope="module")
def real_suite():
    # Debian's python3.11 ships CPython's own tests separately (libpython3.11-testsuite)
    for module in MODULES:
        pytest.importorskip(module, reason="this interpreter has no CPython test suite")
    run = subprocess.run([sys.executable, "-m", "unittest", "-v", *MODULES], capture_output=True, text=True,
                         timeout=600)
    log = run.stdout + run.stderr
    statuses = {m[1]: m[2] for m in re.finditer(r"\(([\w.]+)\) \.\.\. (ok|skipped)", log)}
    assert len(statuses) >= 200 and "Ran " in log  # hundreds of tests
    ids = pick_single_tests({t: "passed" for t, s in statuses.items() if s == "ok"}, 8)
    truth = {}
    for test_id in ids:  # each test alone: its exit code is the truth
        rc = subprocess.run([sys.executable, "-m", "unittest", test_id], capture_output=True, timeout=120).returncode
        truth[test_id] = "passed" if rc == 0 else "failed"
    builtin = parse_log("unittest", log)
    return log, truth, builtin


def counts_of(builtin) -> dict[str, int]:
    """The runner's summary as the built-in unittest parser reads it ('Ran 234 tests', 'OK (skipped=1)')."""
    assert builtin.summary_seen and builtin.counts
    return builtin.counts


def test_a_right_parser_is_accepted_on_hundreds_of_tests_from_eight_single_runs(real_suite):
    """(The first versions of GOOD missed the six `Doctest: name ... ok` lines, then collapsed the doctests that run
    twice under one name: the counts caught both.)"""
    log, truth, builtin = real_suite
    verdict = check_parser(GOOD, [(log, SampledTruth(truth, counts_of(builtin)))], CFG)
    assert verdict.accepted, verdict.reasons


def test_a_parser_that_drops_tests_or_calls_everything_passed_is_rejected(real_suite):
    log, truth, builtin = real_suite
    dropped = check_parser(DROPS_A_MODULE, [(log, SampledTruth(truth, counts_of(builtin)))], CFG)
    assert not dropped.accepted and "summary counts" in " ".join(dropped.reasons)
    vacuous = check_parser(ALL_PASSED, [(log, SampledTruth(truth, counts_of(builtin)))], CFG)
    assert not vacuous.accepted and "summary counts" in " ".join(vacuous.reasons)


def test_without_the_runners_counts_a_sample_cannot_vouch_for_a_larger_parse(real_suite):
    """Eight single runs against 234 parsed tests and no counts: refused, saying what is missing (the
    candidate's own totals are not evidence: ALL_PASSED's would agree with themselves)."""
    log, truth, _ = real_suite
    for code in (GOOD, ALL_PASSED):
        verdict = check_parser(code, [(log, SampledTruth(truth))], CFG)
        assert not verdict.accepted and "--counts" in " ".join(verdict.reasons)


def test_make_parser_counts_option_is_checked():
    from core.errors import UserError
    from swe_envs.cli import summary_counts

    assert summary_counts('{"passed": 233, "skipped": 1}') == {"passed": 233, "skipped": 1}
    for bad in ("233", '{"ok": 3}', '{"passed": -1}', "{"):
        with pytest.raises(UserError):
            summary_counts(bad)
