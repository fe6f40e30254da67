"""Go (``go test -v`` and ``-json``), Rust (``cargo test``), CTest and GoogleTest."""

from __future__ import annotations

import json
import re

from swe_envs.envs.parsers.base import FAILED, PASSED, SKIPPED, ParseResult, clean

_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(")
_GO_PKG = re.compile(r"^(ok|FAIL)\s+(\S+)\s+(?:[\d.]+s|\(cached\)|\[)")
_GO_STATUS = {"PASS": PASSED, "FAIL": FAILED, "SKIP": SKIPPED, "pass": PASSED, "fail": FAILED, "skip": SKIPPED}


def parse_go_test(log: str) -> ParseResult:
    """``go test -v`` and ``go test -json`` (detected per line); ids are test names (``TestX/sub``)."""
    res = ParseResult("go-test")
    for line in clean(log).splitlines():
        if line.startswith("{"):
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                ev = None
            if isinstance(ev, dict) and "Action" in ev:
                action = ev["Action"]
                if ev.get("Test") and action in ("pass", "fail", "skip"):
                    res.add(ev["Test"], _GO_STATUS[action])
                elif not ev.get("Test") and action in ("pass", "fail") and "Package" in ev:
                    res.summary_seen = True
                continue
        if m := _GO_RESULT.match(line):
            res.add(m.group(2), _GO_STATUS[m.group(1)])
        elif _GO_PKG.match(line):
            res.summary_seen = True
    return res


_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored|bench)(?:,.*)?$")
_CARGO_RESULT = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")


def parse_cargo(log: str) -> ParseResult:
    res = ParseResult("cargo")
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for line in clean(log).splitlines():
        line = line.rstrip()
        if m := _CARGO_TEST.match(line):
            status = {"ok": PASSED, "FAILED": FAILED, "ignored": SKIPPED, "bench": PASSED}[m.group(2)]
            res.add(m.group(1), status)
        elif m := _CARGO_RESULT.match(line):
            res.summary_seen = True
            counts["passed"] += int(m.group(2))
            counts["failed"] += int(m.group(3))
            counts["skipped"] += int(m.group(4))
    res.counts = counts if res.summary_seen else None
    return res


_CTEST = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S.*?) \.+\s*(\**)(Passed|Failed|Skipped|Not Run|Timeout|Exception|\w+)\b.*?\s[\d.]+ sec\s*$")
_CTEST_SUMMARY = re.compile(r"^\d+% tests passed, (\d+) tests? failed out of (\d+)")
_CTEST_DID_NOT_RUN = re.compile(r"^\s*\d+ - .+ \((Skipped|Disabled)\)\s*$")


def parse_ctest(log: str) -> ParseResult:
    """CTest's summary counts a skipped test among the passed ones and a test that could not run
    (its executable missing: ``***Not Run``) among the failed ones; the skipped ones are those
    listed under "The following tests did not run"."""
    res = ParseResult("ctest")
    failed = total = skipped = 0
    for line in clean(log).splitlines():
        if m := _CTEST.match(line):
            word = m.group(3)
            skip = word == "Skipped" or (word == "Not Run" and "Disabled" in line)
            res.add(m.group(1), PASSED if word == "Passed" else SKIPPED if skip else FAILED)
        elif m := _CTEST_SUMMARY.match(line):
            res.summary_seen = True
            failed, total = failed + int(m.group(1)), total + int(m.group(2))
        elif res.summary_seen and _CTEST_DID_NOT_RUN.match(line):
            skipped += 1
    if res.summary_seen:
        res.counts = {"passed": total - failed - skipped, "failed": failed, "skipped": skipped, "error": 0}
    return res


_GTEST = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] ([\w/]+\.[\w/]+)(?:, where .*?)?(?: \(\d+ ms\))?\s*$")
_GTEST_RAN = re.compile(r"^\[==========\] (\d+) tests? from \d+ test (?:suites?|cases?) ran")
_GTEST_TOTAL = re.compile(r"^\[\s+(PASSED|FAILED|SKIPPED)\s+\] (\d+) tests?[.,]")


def parse_gtest(log: str) -> ParseResult:
    res = ParseResult("gtest")
    counts: dict[str, int] = {}
    for line in clean(log).splitlines():
        if m := _GTEST.match(line):
            res.add(m.group(2), {"OK": PASSED, "FAILED": FAILED, "SKIPPED": SKIPPED}[m.group(1)])
        elif _GTEST_RAN.match(line):
            res.summary_seen = True
        elif (m := _GTEST_TOTAL.match(line)) and res.summary_seen:
            key = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
            counts[key] = counts.get(key, 0) + int(m.group(2))
    if res.summary_seen:
        res.counts = {"passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
                      "skipped": counts.get("skipped", 0), "error": 0}
    return res
