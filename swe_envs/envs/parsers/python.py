"""pytest (``-v`` lines and the ``-rA`` short summary) and unittest (``-v``)."""

from __future__ import annotations

import re

from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, ParseResult, clean

_PYTEST_STATUS = {"PASSED": PASSED, "XPASS": PASSED, "FAILED": FAILED, "ERROR": ERROR, "SKIPPED": SKIPPED,
                  "XFAIL": SKIPPED, "xfail": SKIPPED}
# -v:  tests/test_x.py::test_a PASSED   [ 50%]     (the nodeid has no spaces, parameters may);
# pytest 2.x-3.x write an expected failure in lower case there ("test_a xfail")
_PYTEST_V = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|xfail|XPASS)(?: \(.*\))?\s*"
                       r"(?:\[\s*\d+%\])?\s*$")
# -rA: PASSED tests/test_x.py::test_a [- message]
# failures, errors, xfails (and xpasses since pytest 7) carry " - reason"; a passing test's id may hold
# " - " itself (sphinx's test_unparse[a - b-a - b]): cut there, it counted twice against the summary
_PYTEST_R = re.compile(r"^(?:(PASSED|XPASS) (\S+::.+?)|(FAILED|ERROR|XFAIL) (\S+::.+?)(?: - .*)?)$")
_PYTEST_SUMMARY = re.compile(r"^=+ (.*\b(passed|failed|error|errors|skipped|deselected|xfailed|xpassed|no tests ran)\b.*) in [\d.]+(?:s\b| seconds)")  # pytest < 5.1 says "seconds"
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
# a skip in the short summary, by location and count (every pytest era: "SKIP" before 3.x's
# rename, "SKIPPED" since; -rs and -rA both print it, aggregated per location and reason)
_PYTEST_SKIP_LINE = re.compile(r"^(?:SKIP|SKIPPED) \[(\d+)\] \S+?:\d+: ")
# modules skipped at collection, in the header of every era ("collected 3 items / 1 skipped");
# pytest 3.0's -rA prints no skip lines at all, only this
_COLLECTED_SKIPS = re.compile(r"collected \d+ items? / (?:\d+ errors? / )?(\d+) skipped")


# the sections after the progress lines; captured output (a pytester run's own report, say)
# is printed inside them, so -v lines count only before the first, -rA lines only after the
# last "short test summary info" header (the outer session's, printed at the very end)
_SECTION = re.compile(r"^=+ (FAILURES|ERRORS|PASSES|warnings summary|short test summary info) =+$")
_SHORT = re.compile(r"^=+ short test summary info =+$")


def _short_id(line: str, m: re.Match, known: dict[str, str]) -> str:
    """The test id of a ``-rA`` line: its longest prefix ending at a space that a ``-v`` line named
    (an XPASS line carries its reason, after " " in pytest 7, after " - " in 8, and a parametrized
    id may hold both itself: ``test_p[c - d]``), else the regex's cut."""
    rest = line.split(" ", 1)[1]
    cuts = [rest] + [rest[:i] for i in range(len(rest) - 1, 0, -1) if rest[i] == " "]
    return next((c for c in cuts if c in known), m.group(2) or m.group(4))


def parse_pytest(log: str) -> ParseResult:
    res = ParseResult("pytest")
    lines = [line.rstrip() for line in clean(log).splitlines()]
    first_section = next((i for i, line in enumerate(lines) if _SECTION.match(line)), len(lines))
    last_short = max((i for i, line in enumerate(lines) if _SHORT.match(line)), default=len(lines))
    for i, line in enumerate(lines):
        if i < first_section and (m := _PYTEST_V.match(line)):
            res.add(m.group(1), _PYTEST_STATUS[m.group(2)])
        elif i > last_short and (m := _PYTEST_R.match(line)):
            # a collection error ("ERROR tests/x.py - ImportError") has no "::" and is no test
            res.add(_short_id(line, m, res.statuses), _PYTEST_STATUS[m.group(1) or m.group(3)])
        elif i > last_short and (m := _PYTEST_SKIP_LINE.match(line)):
            res.located_skips += int(m.group(1))
        elif i < first_section and (m := _COLLECTED_SKIPS.search(line)):
            res.located_skips += int(m.group(1))
        elif m := _PYTEST_SUMMARY.match(line):
            res.summary_seen = True
            counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
            for n, kind in _COUNT.findall(m.group(1)):
                key = {"errors": "error", "xfailed": "skipped", "xpassed": "passed"}.get(kind, kind)
                if key in counts:
                    counts[key] += int(n)
            res.counts = counts
    return res


# SWE-bench's harness (parse_log_pytest): a line starting with a status word names the test by its
# next whitespace-separated token (so "test_x[a b]" is "test_x[a"), a later line wins and XPASS
# lines are ignored. Its FAIL_TO_PASS / PASS_TO_PASS hold PASSED tests only: XFAIL is no pass.
_SWEBENCH_STATUS = {"PASSED": PASSED, "XFAIL": SKIPPED, "FAILED": FAILED, "ERROR": ERROR, "SKIPPED": SKIPPED}


def parse_pytest_swebench(log: str) -> ParseResult:
    """pytest statuses under SWE-bench's test ids; the fake-pass guards check the full parse."""
    res = ParseResult("pytest-swebench")
    for line in clean(log).split("\n"):
        word = next((w for w in _SWEBENCH_STATUS if line.startswith(w)), None)
        if word is None:
            continue
        if word == "FAILED":
            line = line.replace(" - ", " ")
        parts = line.split()
        if len(parts) > 1:
            res.statuses.pop(parts[1], None)  # the last report of a test wins, as in the harness
            res.statuses[parts[1]] = _SWEBENCH_STATUS.get(parts[0], _SWEBENCH_STATUS[word])
    full = parse_pytest(log)
    res.summary_seen, res.guard = full.summary_seen, full
    return res


_UNITTEST_STATUS = {"ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": SKIPPED,
                    "unexpected success": FAILED}
# 3.11+: "test_a (pkg.mod.Class.test_a) ... ok"; older: "test_a (pkg.mod.Class) ... ok"
_UNITTEST_V = re.compile(r"^(\w+) \(([\w.]+)\) \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_FINAL = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")


def parse_unittest(log: str) -> ParseResult:
    res = ParseResult("unittest")
    ran = None
    for line in clean(log).splitlines():
        line = line.rstrip()
        if m := _UNITTEST_V.match(line):
            name, where, outcome = m.groups()
            test_id = where if where.endswith("." + name) else f"{where}.{name}"
            res.add(test_id, SKIPPED if outcome.startswith("skipped") else _UNITTEST_STATUS[outcome])
        elif m := _UNITTEST_RAN.match(line):
            ran = int(m.group(1))
        elif (m := _UNITTEST_FINAL.match(line)) and ran is not None:
            res.summary_seen = True
            parts = dict(re.findall(r"(\w+)=(\d+)", m.group(2) or ""))
            failed, errors = int(parts.get("failures", 0)), int(parts.get("errors", 0))
            skipped = int(parts.get("skipped", 0)) + int(parts.get("expected_failures", 0))
            failed += int(parts.get("unexpected_successes", 0))
            res.counts = {"passed": ran - failed - errors - skipped, "failed": failed, "skipped": skipped,
                          "error": errors}
    return res
