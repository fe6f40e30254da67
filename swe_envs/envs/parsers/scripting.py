"""PHPUnit (TeamCity messages, or ``--debug --verbose`` text), RSpec (documentation format), minitest (-v)."""

from __future__ import annotations

import re

from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, ParseResult, clean

_TC = re.compile(r"^##teamcity\[(\w+)((?: \w+='(?:[^'|]|\|.)*')*)\s*\]\s*$")
_TC_ATTR = re.compile(r"(\w+)='((?:[^'|]|\|.)*)'")
_PHPUNIT_TOTAL = re.compile(r"^Tests: (\d+), Assertions: \d+(.*)\.$")
_PHPUNIT_OK = re.compile(r"^OK \((\d+) tests?, \d+ assertions?\)")
_PHPUNIT_DEBUG = re.compile(r"^Test '(.+?)' (started|ended)$")
_PHPUNIT_SECTION = re.compile(r"^There (?:was|were) \d+ (error|failure|skipped test|incomplete test|risky test|warning)s?:$")
_PHPUNIT_ITEM = re.compile(r"^\d+\) (\S+::\S+?)(?: with data set .*)?$")


def _tc_id(attrs: dict[str, str]) -> str:
    hint = attrs.get("locationHint", "")
    if "::" in hint:  # php_qn:///path/FooTest.php::\Ns\FooTest::testX
        test_id, data_set = hint.split("::", 1)[1].lstrip("\\"), _data_set(attrs.get("name", ""))
        # PHPUnit 9.6's hint names the data set already ("::testX with data set #0"); older ones do not
        return test_id if test_id.endswith(data_set) else test_id + data_set
    return attrs.get("name", "")


def _data_set(name: str) -> str:
    m = re.search(r" with data set .*$", name)
    return m.group(0) if m else ""


def parse_phpunit(log: str) -> ParseResult:
    res = ParseResult("phpunit")
    started: dict[str, str] = {}  # TeamCity name -> id
    outcome: dict[str, str] = {}
    debug_seen: list[str] = []
    section = ""
    for line in clean(log).splitlines():
        line = line.rstrip()
        if m := _TC.match(line):
            kind, attrs = m.group(1), dict(_TC_ATTR.findall(m.group(2)))
            name = attrs.get("name", "")
            if kind == "testStarted":
                started[name] = _tc_id(attrs)
                outcome[name] = PASSED
            elif kind == "testFailed":
                outcome[name] = FAILED
            elif kind == "testIgnored":
                outcome[name] = SKIPPED
            elif kind == "testFinished" and name in started:
                res.add(started.pop(name), outcome.pop(name, PASSED))
            continue
        if m := _PHPUNIT_DEBUG.match(line):
            if m.group(2) == "ended":
                debug_seen.append(m.group(1))
            continue
        if m := _PHPUNIT_SECTION.match(line):
            section = m.group(1)
            continue
        if section and (m := _PHPUNIT_ITEM.match(line)):
            status = {"error": ERROR, "failure": FAILED, "skipped test": SKIPPED, "incomplete test": SKIPPED}.get(section)
            if status:
                res.statuses[m.group(1)] = status  # the listing is authoritative over "ended"
            continue
        if m := _PHPUNIT_TOTAL.match(line):
            res.summary_seen = True
            parts = {k.lower(): int(v) for k, v in re.findall(r"(\w+): (\d+)", m.group(2))}
            total = int(m.group(1))
            skipped = parts.get("skipped", 0) + parts.get("incomplete", 0)
            failed = parts.get("failures", 0) + parts.get("errors", 0)
            res.counts = {"passed": total - skipped - failed, "failed": failed, "skipped": skipped, "error": 0}
        elif m := _PHPUNIT_OK.match(line):
            res.summary_seen = True
            res.counts = {"passed": int(m.group(1)), "failed": 0, "skipped": 0, "error": 0}
    for test_id in debug_seen:
        res.statuses.setdefault(test_id, PASSED)
    if res.counts:  # compare failed+error as one: TeamCity does not tell errors from failures
        res.counts = {**res.counts, "failed": res.counts["failed"] + res.counts["error"], "error": 0}
    return res


_RSPEC_STATUS = re.compile(r"^(.*?) \((FAILED - \d+|PENDING: .*)\)$")
_RSPEC_TOTAL = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?"
                          r"(?:, (\d+) errors? occurred outside of examples)?")
# a file that failed to load (or a failing suite hook): its report, up to the end of its backtrace
_RSPEC_ERROR = "An error occurred "
# RSpec's own notes, never part of the example tree
_RSPEC_META = ("No examples found.", "Run options:", "Randomized with seed", "All examples were filtered out")
_RSPEC_END = ("Pending:", "Failures:", "Finished in ")
# what the code under test prints between the tree's lines: Ruby's warnings (stderr) and
# Logger's default format; neither is an example group or an example
_RUBY_NOISE = re.compile(r"^(?:\S+:\d+: warning: |[DIWEFAU], \[\d{4}-\d\d-\d\dT[\d:.]+ #\d+\]\s+[A-Z]+ -- )")


def parse_rspec(log: str) -> ParseResult:
    """Documentation format: a line is an example when the next line is not indented deeper.

    Only read when the summary line is there: without it any indented text would pass for a tree."""
    res = ParseResult("rspec")
    nodes: list[tuple[int, str]] = []
    tree_done = in_error = traced = False
    for line in clean(log).splitlines():
        line = line.rstrip()
        if m := _RSPEC_TOTAL.match(line):
            res.summary_seen = True
            ex, fails, pending, outside = (int(g or 0) for g in m.groups())
            res.counts = {"passed": ex - fails - pending, "failed": fails, "skipped": pending, "error": outside}
        if tree_done or not line.strip():
            continue
        if line.startswith(_RSPEC_END):
            tree_done = True
            continue
        if line.startswith(_RSPEC_ERROR):
            in_error, traced = True, False
            continue
        if in_error:
            if line.startswith("# "):
                traced = True
                continue
            if not traced:
                continue
            in_error = False
        if _RUBY_NOISE.match(line) or line.startswith(_RSPEC_META):
            continue
        nodes.append((len(line) - len(line.lstrip(" ")), line.strip()))
    if not res.summary_seen:
        return res  # plain indented text is no evidence of RSpec without its summary line
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for i, (indent, text) in enumerate(nodes):
        while stack and stack[-1][0] >= indent:
            stack.pop()
        is_group = i + 1 < len(nodes) and nodes[i + 1][0] > indent
        if is_group:
            stack.append((indent, text))
            continue
        if not stack:
            continue  # an example is always inside a group: an unindented leaf is other output
        status = PASSED
        if m := _RSPEC_STATUS.match(text):
            text, status = m.group(1), FAILED if m.group(2).startswith("FAILED") else SKIPPED
        name = " ".join([t for _, t in stack] + [text])
        # two examples may share a description (RSpec allows it): each is its own test
        seen[name] = seen.get(name, 0) + 1
        res.add(name if seen[name] == 1 else f"{name} [{seen[name]}]", status)
    return res


_MINITEST = re.compile(r"^(\S+#\S+) = [\d.]+ s = ([.FES])$")
_MINITEST_TOTAL = re.compile(r"^(\d+) runs, \d+ assertions, (\d+) failures, (\d+) errors, (\d+) skips")


def parse_minitest(log: str) -> ParseResult:
    res = ParseResult("minitest")
    for line in clean(log).splitlines():
        line = line.rstrip()
        if m := _MINITEST.match(line):
            res.add(m.group(1), {".": PASSED, "F": FAILED, "E": ERROR, "S": SKIPPED}[m.group(2)])
        elif m := _MINITEST_TOTAL.match(line):
            runs, f, e, s = map(int, m.groups())
            res.summary_seen = True
            res.counts = {"passed": runs - f - e - s, "failed": f, "skipped": s, "error": e}
    return res


# test-unit (Ruby's bundled ``test/unit``) with ``-v``: a test case's name alone on its line, then
# ``  test_name:<tabs>.: (0.001)``; a failure prints its report between the mark and the time
_TU_CASE = re.compile(r"^(\s*)(\S.*?): $")
_TU_TEST = re.compile(r"^(\s+)(\S.*?):\t+([.FEOPN])")
_TU_TOTAL = re.compile(r"^(\d+) tests, \d+ assertions, (\d+) failures, (\d+) errors, (\d+) pendings, (\d+) omissions")


def parse_test_unit(log: str) -> ParseResult:
    res = ParseResult("test-unit")
    cases: list[tuple[int, str]] = []  # (indent, name): sub test cases nest by indentation
    for line in clean(log).splitlines():
        line = line.rstrip("\n")
        if m := _TU_TOTAL.match(line):
            tests, f, e, p, o = map(int, m.groups())
            res.summary_seen = True
            res.counts = {"passed": tests - f - e - p - o, "failed": f, "skipped": p + o, "error": e}
        elif m := _TU_TEST.match(line):
            indent = len(m.group(1))
            while cases and cases[-1][0] >= indent:
                cases.pop()
            case = "::".join(c for _, c in cases)
            status = {".": PASSED, "F": FAILED, "E": ERROR, "O": SKIPPED, "P": SKIPPED, "N": PASSED}[m.group(3)]
            res.add(f"{case}#{m.group(2)}" if case else m.group(2), status)
        elif m := _TU_CASE.match(line):
            indent = len(m.group(1))
            while cases and cases[-1][0] >= indent:
                cases.pop()
            cases.append((indent, m.group(2)))
    return res
