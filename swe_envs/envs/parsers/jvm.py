"""JVM runners: JUnit XML reports (any producer), Maven Surefire and Gradle console output.

Test ids are ``fully.qualified.Class.method`` (JUnit 5's trailing ``()`` dropped; nested
classes keep ``$``): what Surefire's reports name and what SWE-bench-Java style harnesses
(Multi-SWE-bench) key FAIL_TO_PASS / PASS_TO_PASS by. Maven and Gradle print only failing
tests by name, so the Java test commands print the XML reports into the log after the run
(``----- JUnit XML report:``); the Surefire and Gradle parsers read those blocks and fall back
to the console lines.

Class + method is not unique for JUnit 3 suites built at run time: commons-collections' BulkTest
runs a map's ``entrySet()`` tests inside the map's test class, again under ``headMap()``, ...,
so Surefire's report repeats ``DualTreeBidiMapTest.testSimpleSerialization`` 31 times and a
class+method key merges 31 results into one. Where the JUnit Platform wrote its unique id
(the console launcher's XML, ``unique-id:`` in ``system-out``), the JUnit 3/4 suite path in it
goes into the id (``DualTreeBidiMapTest.bulkTestTailMap.testFirstKey``, the way BulkTest's own
verbose names read): built from names in the code, never from run order, so the same test has
the same id in every run. Only a report that still repeats an id (a class run by two runners)
numbers the repeats in report order (``id#2``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, ParseResult, clean

_SUITES = re.compile(r"<testsuites\b.*?</testsuites>", re.S)
_SUITE = re.compile(r"<testsuite\b.*?</testsuite>", re.S)


_UNIQUE_ID = re.compile(r"^unique-id: (\[.*\])\s*$", re.M)
_SEGMENT = re.compile(r"\[([A-Za-z-]+):([^\]]*)\]")
_DESCRIBED = re.compile(r"^(.*)\(([\w.$]+)\)$")  # JUnit 4's "method(fully.qualified.Class)"


def _test_id(classname: str, name: str) -> str:
    name = re.sub(r"\(\)$", "", name.strip())
    return f"{classname}.{name}" if classname else name


def _unquote(value: str) -> str:
    """Unique-id segment values are percent-encoded (``%5Bzu_ZA%5D``)."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), value)


def _suite_path(classname: str, name: str, unique_id: str) -> list[str]:
    """The JUnit 3/4 suites between a vintage test and its class in the platform's unique id:
    ``[runner:C]/[test:bulkTestTailMap]/[test:testFirstKey(C$TestTailMap)]`` -> ``["bulkTestTailMap"]``.
    A Parameterized runner's ``[0]`` / ``[zu_ZA]`` level is already in the test's name; a test the
    engine met only at run time (``[dynamic:...]``, no path) is told apart by its declaring class."""
    segments = _SEGMENT.findall(unique_id)
    if not segments or segments[0] != ("engine", "junit-vintage") or len(segments) < 3:
        return []
    described = _DESCRIBED.match(_unquote(segments[-1][1]))
    declaring = described.group(2) if described else ""
    # a suite named after its class (JUnit 3's TestSuite(Class)) says nothing the class name doesn't
    path = [v for kind, v in ((k, _unquote(v)) for k, v in segments[2:-1])
            if kind == "test" and v not in name and v not in (classname, declaring)]
    if not path and declaring not in (classname, ""):
        path = [declaring.rsplit(".", 1)[-1]]
    return path


def _read_xml(log: str, res: ParseResult) -> int:
    """Add every <testcase> of the XML blocks found in ``log``; returns the number of suites read."""
    suites = 0
    seen: dict[str, int] = {}
    blocks = _SUITES.findall(log) + _SUITE.findall(_SUITES.sub("", log))
    for block in blocks:
        try:
            root = ET.fromstring(block)
        except ET.ParseError:
            continue
        suites += 1
        for case in root.iter("testcase"):
            status = PASSED
            for child in case:
                if child.tag == "skipped":
                    status = SKIPPED
                elif child.tag == "failure":
                    status = FAILED
                elif child.tag == "error":
                    status = ERROR
            classname, name = case.get("classname", ""), case.get("name", "")
            unique = _UNIQUE_ID.search(case.findtext("system-out") or "")
            path = _suite_path(classname, name, unique.group(1)) if unique else []
            test_id = _test_id(".".join([classname, *path]) if classname else ".".join(path), name)
            seen[test_id] = seen.get(test_id, 0) + 1
            res.add(test_id if seen[test_id] == 1 else f"{test_id}#{seen[test_id]}", status)
    return suites


def parse_junit_xml(log: str) -> ParseResult:
    res = ParseResult("junit-xml")
    res.summary_seen = _read_xml(log, res) > 0
    return res


_SUREFIRE_TOTAL = re.compile(r"^\[(?:INFO|ERROR|WARNING)\] Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$")
# surefire 2.x: "[ERROR] fails  Time elapsed: 0.007 s  <<< FAILURE!" under "Running mix.MixTest";
# 3.x: "[ERROR] mix.MixTest.fails -- Time elapsed: ..." / "[ERROR] fails(mix.MixTest)  Time elapsed"
_SUREFIRE_RUNNING = re.compile(r"^\[INFO\] Running (\S+)")
_SUREFIRE_CASE = re.compile(r"^\[ERROR\] (\S+?)(?:\((\S+)\))?\s+(?:--\s+)?Time elapsed: .*<<< (FAILURE|ERROR)!")


def parse_surefire(log: str) -> ParseResult:
    res = ParseResult("surefire")
    text = clean(log)
    from_xml = _read_xml(text, res) > 0
    current = ""
    for line in text.splitlines():
        if m := _SUREFIRE_RUNNING.match(line):
            current = m.group(1)
        elif (m := _SUREFIRE_CASE.match(line)) and not from_xml:
            name, cls, kind = m.groups()
            if "Tests run:" in line:
                continue
            test_id = _test_id(cls, name) if cls else (name if "." in name and not current else _test_id(current, name))
            res.add(test_id, FAILED if kind == "FAILURE" else ERROR)
        elif m := _SUREFIRE_TOTAL.match(line):
            run, failures, errors, skipped = map(int, m.groups())
            res.summary_seen = True
            res.counts = {"passed": run - failures - errors - skipped, "failed": failures, "skipped": skipped,
                          "error": errors}
    if res.counts and not from_xml:
        res.counts = None  # without the reports passing tests are unnamed: nothing to cross-check
    return res


_GRADLE_CASE = re.compile(r"^(\S[^>]*?) > (.+?) (PASSED|FAILED|SKIPPED)$")
_GRADLE_DONE = re.compile(r"^(\d+) tests? completed(?:, (\d+) failed)?(?:, (\d+) skipped)?")


def parse_gradle(log: str) -> ParseResult:
    res = ParseResult("gradle")
    text = clean(log)
    from_xml = _read_xml(text, res) > 0
    for line in text.splitlines():
        line = line.rstrip()
        if (m := _GRADLE_CASE.match(line)) and not from_xml:
            status = {"PASSED": PASSED, "FAILED": FAILED, "SKIPPED": SKIPPED}[m.group(3)]
            res.add(_test_id(m.group(1).strip(), m.group(2)), status)
        elif m := _GRADLE_DONE.match(line):
            res.summary_seen = True
            # "completed" counts the failed and skipped ones too
            done, failed, skipped = (int(g or 0) for g in m.groups())
            res.counts = {"passed": done - failed - skipped, "failed": failed, "skipped": skipped, "error": 0}
        elif line.startswith(("BUILD SUCCESSFUL", "BUILD FAILED")) and res.statuses:
            res.summary_seen = True
    if res.counts and not from_xml:
        res.counts = None  # the console names only what its test logging shows: nothing to cross-check
    return res
