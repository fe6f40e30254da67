"""Test runners a repository ships itself: sympy's ``bin/test`` and Django's ``tests/runtests.py``.

Both print their own ids, which are the ids SWE-bench's datasets hold for those repositories:
``bin/test --verbose`` prints a bare function name per test (``test_symbols ok``); Django's
runner (unittest underneath, ``--verbosity 2``) prints the unittest description before `` ... ``
(``test_x (app.tests.Class) ... ok``, or a docstring's first line where the test has one).
"""

from __future__ import annotations

import re

from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, ParseResult, clean

# bin/test --verbose: "test_name <outcome>", a file's last test may carry "[OK]"/"[FAIL]" after
# padding. ok = pass; F = failure; E = exception; f = expected failure; X = unexpected pass (no
# failure for sympy, no pass in SWE-bench's lists); s/w/T/K = skipped (plain, slow, timeout,
# interrupted), a skip's reason printed before its letter
_SYMPY_TEST = re.compile(r"^(test_\w+) (?:(ok)|(?:.* )?([FEfXswTK]))(?:\s+\[(?:OK|FAIL)\])?\s*$")
_SYMPY_STATUS = {"ok": PASSED, "F": FAILED, "E": ERROR, "f": SKIPPED, "X": SKIPPED, "s": SKIPPED, "w": SKIPPED,
                 "T": SKIPPED, "K": SKIPPED}
_SYMPY_START = re.compile(r"^=+ test process starts =+$")
_SYMPY_END = re.compile(r"^=+ tests finished: (.*) in [\d.]+ seconds =+$")
_SYMPY_COUNT = re.compile(r"(\d+) (passed|failed|skipped|expected to fail but passed|expected to fail|exceptions?)")


def parse_sympy(log: str) -> ParseResult:
    res = ParseResult("sympy")
    started = False
    for line in clean(log).splitlines():
        line = line.rstrip()
        if _SYMPY_START.match(line):
            started = True
        elif started and (m := _SYMPY_TEST.match(line)):
            res.add(m.group(1), PASSED if m.group(2) else _SYMPY_STATUS[m.group(3)])
        elif m := _SYMPY_END.match(line):
            res.summary_seen = True
            counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
            for n, kind in _SYMPY_COUNT.findall(m.group(1)):
                key = {"expected to fail": "skipped", "expected to fail but passed": "skipped",
                       "exception": "error", "exceptions": "error"}.get(kind, kind)
                counts[key] += int(n)
            res.counts = counts
    return res


# "<description> ... <outcome>"; a description is unittest's "name (module.Class)" or the first
# line of the test's docstring, which unittest prints on the line after the name
_DJANGO_TEST = re.compile(r"^(.+?) \.\.\. (ok|OK|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")
_DJANGO_STATUS = {"ok": PASSED, "OK": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": SKIPPED,
                  "unexpected success": FAILED}
_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_FINAL = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")


def parse_django(log: str) -> ParseResult:
    """Ids as the runner prints them; tests sharing a docstring's first line share an id (as in
    SWE-bench's lists), so the guards check ``guard``: every reported line, numbered."""
    res, every = ParseResult("django"), ParseResult("django")
    res.guard = every
    ran = None
    for line in clean(log).splitlines():
        line = line.strip()
        if m := _DJANGO_TEST.match(line):
            desc, outcome = m.groups()
            status = SKIPPED if outcome.startswith("skipped") else _DJANGO_STATUS[outcome]
            res.add(desc, status)
            every.add(f"{desc} #{len(every.statuses) + 1}", status)
        elif m := _RAN.match(line):
            ran = int(m.group(1))
        elif (m := _FINAL.match(line)) and ran is not None:
            res.summary_seen = True
            parts = dict(re.findall(r"(\w+)=(\d+)", m.group(2) or ""))
            failed, errors = int(parts.get("failures", 0)), int(parts.get("errors", 0))
            skipped = int(parts.get("skipped", 0)) + int(parts.get("expected_failures", 0))
            failed += int(parts.get("unexpected_successes", 0))
            res.counts = every.counts = {"passed": ran - failed - errors - skipped, "failed": failed,
                                         "skipped": skipped, "error": errors}
            every.summary_seen = True
    return res
