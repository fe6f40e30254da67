"""Language-aware test-log parsers: log text -> {test id: passed|failed|skipped|error}.

``parse_log(runner, log)`` with a runner name from ``RUNNERS``, ``auto`` (every parser is
tried; the one that saw its summary line and found the most tests wins), or ``file:PATH``
(an accepted LLM-generated parser, run in the parser sandbox).
"""

from __future__ import annotations

from collections.abc import Callable

from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, STATUSES, ParseResult
from swe_envs.envs.parsers.js import parse_jest, parse_mocha, parse_tap, parse_vitest
from swe_envs.envs.parsers.jvm import parse_gradle, parse_junit_xml, parse_surefire
from swe_envs.envs.parsers.native import parse_cargo, parse_ctest, parse_go_test, parse_gtest
from swe_envs.envs.parsers.project_runners import parse_django, parse_sympy
from swe_envs.envs.parsers.python import parse_pytest, parse_pytest_swebench, parse_unittest
from swe_envs.envs.parsers.scripting import parse_minitest, parse_phpunit, parse_rspec, parse_test_unit

# dict order is the tie-break of ``auto``: JUnit XML, when a log carries it, is the most exact
RUNNERS: dict[str, Callable[[str], ParseResult]] = {
    "junit-xml": parse_junit_xml,
    "pytest": parse_pytest,
    "pytest-swebench": parse_pytest_swebench,
    "unittest": parse_unittest,
    "jest": parse_jest,
    "mocha": parse_mocha,
    "vitest": parse_vitest,
    "tap": parse_tap,
    "surefire": parse_surefire,
    "gradle": parse_gradle,
    "go-test": parse_go_test,
    "cargo": parse_cargo,
    "ctest": parse_ctest,
    "gtest": parse_gtest,
    "phpunit": parse_phpunit,
    "rspec": parse_rspec,
    "minitest": parse_minitest,
    "test-unit": parse_test_unit,
    "sympy": parse_sympy,
    "django": parse_django,
}
ALIASES = {"go": "go-test", "go-json": "go-test", "junit": "junit-xml", "maven": "surefire", "node": "tap",
           "node-test": "tap", "googletest": "gtest", "cargo-test": "cargo", "python-unittest": "unittest"}

__all__ = ["ERROR", "FAILED", "PASSED", "SKIPPED", "STATUSES", "ParseResult", "RUNNERS", "detect_runner",
           "parse_log", "runner_names"]


def runner_names() -> list[str]:
    return sorted(RUNNERS)


# id conventions of one runner, not runners of their own: never picked by ``auto``
NOT_AUTO = {"pytest-swebench"}


def detect_runner(log: str) -> str | None:
    """The built-in runner whose parser recognises ``log`` best (summary seen, most tests)."""
    best, key = None, (False, 0)
    for name, fn in RUNNERS.items():
        if name in NOT_AUTO:
            continue
        try:
            res = fn(log)
        except Exception:
            continue
        k = (res.summary_seen, len(res.statuses))
        if res.statuses and k > key:
            best, key = name, k
    return best


def parse_log(runner: str, log: str) -> ParseResult:
    runner = ALIASES.get(runner, runner)
    if runner == "auto":
        found = detect_runner(log)
        return RUNNERS[found](log) if found else ParseResult("auto")
    if runner.startswith("file:"):
        from swe_envs.envs.parsers.llm import run_parser_file

        return run_parser_file(runner[5:], log)
    if runner not in RUNNERS:
        from core.errors import UserError

        raise UserError(f"unknown runner '{runner}'; known: {', '.join(runner_names())}, auto, file:PATH")
    return RUNNERS[runner](log)
