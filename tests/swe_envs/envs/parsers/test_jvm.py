"""JUnit XML test ids: unique and stable where JUnit 3 suites repeat class + method (the shapes
below are the JUnit console launcher's XML of commons-collections4's BulkTest suites)."""

from __future__ import annotations

from swe_envs.envs.parsers import parse_log

RUNNER = "org.apache.commons.collections4.bidimap.DualTreeBidiMapTest"
ENTRY_SET = "org.apache.commons.collections4.map.AbstractMapTest$TestMapEntrySet"


def _case(name: str, classname: str, unique_id: str | None, failed: bool = False) -> str:
    out = f'<testcase name="{name}" classname="{classname}" time="0">'
    if failed:
        out += '<failure message="boom" type="java.lang.AssertionError">boom</failure>'
    if unique_id:
        out += f"<system-out><![CDATA[\nunique-id: {unique_id}\ndisplay-name: {name}\n]]></system-out>"
    return out + "</testcase>"


def _report(*cases: str) -> str:
    body = "\n".join(cases)
    return (f"----- JUnit XML report: TEST-junit-vintage.xml\n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            f'<testsuite name="JUnit Vintage" tests="{len(cases)}">\n{body}\n</testsuite>\n'
            f"[INFO] Tests run: {len(cases)}, Failures: 0, Errors: 0, Skipped: 0\n")


V = f"[engine:junit-vintage]/[runner:{RUNNER}]"
BULK = [
    _case("testSimpleSerialization", RUNNER, f"{V}/[test:testSimpleSerialization({RUNNER})]"),
    # the same method under two BulkTest suites of the same class: class + method repeats
    _case("testSimpleSerialization", RUNNER, f"{V}/[test:bulkTestMapEntrySet]/[test:testSimpleSerialization({ENTRY_SET})]"),
    _case("testSimpleSerialization", RUNNER,
          f"{V}/[test:bulkTestTailMap]/[test:bulkTestMapEntrySet]/[test:testSimpleSerialization({ENTRY_SET})]", True),
    # met only at run time: no suite path, told apart by the class that declares it
    _case("testSimpleSerialization", RUNNER, f"{V}/[dynamic:testSimpleSerialization({ENTRY_SET})]"),
    # JUnit 4 Parameterized: the parameter level is already in the name (percent-encoded in the id)
    _case("testgetString[zu_ZA]", "org.apache.commons.collections4.MapUtilsTest",
          "[engine:junit-vintage]/[runner:org.apache.commons.collections4.MapUtilsTest]/[test:%5Bzu_ZA%5D]/"
          "[test:testgetString%5Bzu_ZA%5D(org.apache.commons.collections4.MapUtilsTest)]"),
    # JUnit 3 TestSuite(Class): a suite level named after the class itself
    _case("testSort", "a.NullComparatorTest$One",
          "[engine:junit-vintage]/[runner:a.NullComparatorTest$One]/[test:a.NullComparatorTest$One]/"
          "[test:testSort(a.NullComparatorTest$One)]"),
    # Jupiter: class + method are unique already; the ids stay what they were
    _case("adds(int)[1]", "calc.CalcTest",
          "[engine:junit-jupiter]/[class:calc.CalcTest]/[test-template:adds(int)]/[test-template-invocation:#1]"),
    _case("subtracts()", "calc.CalcTest$Nested",
          "[engine:junit-jupiter]/[class:calc.CalcTest]/[nested-class:Nested]/[method:subtracts()]"),
]


def test_bulk_test_suites_get_one_id_per_test_from_the_suite_path():
    res = parse_log("surefire", _report(*BULK))
    assert res.statuses == {
        f"{RUNNER}.testSimpleSerialization": "passed",
        f"{RUNNER}.bulkTestMapEntrySet.testSimpleSerialization": "passed",
        f"{RUNNER}.bulkTestTailMap.bulkTestMapEntrySet.testSimpleSerialization": "failed",
        f"{RUNNER}.AbstractMapTest$TestMapEntrySet.testSimpleSerialization": "passed",
        "org.apache.commons.collections4.MapUtilsTest.testgetString[zu_ZA]": "passed",
        "a.NullComparatorTest$One.testSort": "passed",
        "calc.CalcTest.adds(int)[1]": "passed",
        "calc.CalcTest$Nested.subtracts": "passed",
    }
    # one id per test case: the parse can equal the runner's count
    assert sum(res.tally().values()) == len(BULK) == res.counts["passed"]


def test_ids_do_not_depend_on_the_order_tests_ran_in():
    # FAIL_TO_PASS / PASS_TO_PASS compare two runs: the ids come from names, never positions
    forward = parse_log("surefire", _report(*BULK)).statuses
    backward = parse_log("surefire", _report(*reversed(BULK))).statuses
    assert forward == backward


def test_a_test_two_runners_ran_is_numbered_not_merged():
    # a JUnit 3 class run by its own runner and by a suite: the same unique path twice
    one = _case("warning", "junit.framework.TestSuite$1",
                "[engine:junit-vintage]/[runner:a.BulkTest]/[test:warning(junit.framework.TestSuite$1)]", True)
    two = _case("warning", "junit.framework.TestSuite$1",
                "[engine:junit-vintage]/[runner:a.OtherTest]/[test:warning(junit.framework.TestSuite$1)]")
    res = parse_log("junit-xml", _report(one, two))
    assert res.statuses == {"junit.framework.TestSuite$1.warning": "failed", "junit.framework.TestSuite$1.warning#2": "passed"}


def test_reports_without_unique_ids_keep_class_and_method():
    # Surefire's own reports (no platform unique id): what SWE-bench-Java style harnesses key by
    res = parse_log("surefire", _report(_case("adds", "calc.CalcTest", None), _case("subtracts", "calc.CalcTest", None)))
    assert set(res.statuses) == {"calc.CalcTest.adds", "calc.CalcTest.subtracts"}
