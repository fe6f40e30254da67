"""JavaScript/TypeScript runners: TAP (``node --test``, node-tap), mocha (spec), jest (--verbose), vitest.

Test ids: TAP joins nested subtest names with `` > ``; mocha and jest join suite titles and
the test title with a space (jest's own ``fullName``); vitest keeps its ``file > suite > test``.
"""

from __future__ import annotations

import re

from swe_envs.envs.parsers.base import FAILED, PASSED, SKIPPED, ParseResult, clean

_TAP_RESULT = re.compile(r"^(\s*)(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?(.*?)$")
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_TAP_PLAN = re.compile(r"^1\.\.(\d+)")
_TAP_COUNT = re.compile(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$")


def parse_tap(log: str) -> ParseResult:
    res = ParseResult("tap")
    names: dict[int, str] = {}
    in_yaml = None
    plan, top_results, counts = None, 0, {}
    for line in clean(log).splitlines():
        if in_yaml is not None:  # a YAML diagnostic block: "  ---" ... "  ..."
            if line.strip() == "..." and len(line) - len(line.lstrip()) == in_yaml:
                in_yaml = None
            continue
        if line.strip() == "---":
            in_yaml = len(line) - len(line.lstrip())
            continue
        if m := _TAP_SUBTEST.match(line):
            level = len(m.group(1)) // 4
            names = {k: v for k, v in names.items() if k < level}
            names[level] = m.group(2).strip()
            continue
        if m := _TAP_RESULT.match(line):
            level = len(m.group(1)) // 4
            # node-tap 12-15 prints a subtest's result first, its children in "{ ... }" after it
            opens = line.rstrip().endswith("{")
            desc, directive = re.sub(r"\s*\{$", "", m.group(4)) if opens else m.group(4), ""
            if " # " in f" {desc}":
                desc, _, directive = f" {desc}".partition(" # ")
                desc = desc.strip()
            desc = desc or names.get(level, m.group(3) or "")
            test_id = " > ".join([names[k] for k in sorted(names) if k < level] + [desc])
            d = directive.strip().upper()
            if d.startswith(("SKIP", "TODO")):
                status = SKIPPED
            else:
                status = PASSED if m.group(2) == "ok" else FAILED
            res.add(test_id, status)
            if level == 0:
                top_results += 1
            names = {k: v for k, v in names.items() if k < level}
            if opens:
                names[level] = desc
            continue
        if (m := _TAP_PLAN.match(line)) and not line.startswith(" "):
            plan = int(m.group(1))
        elif m := _TAP_COUNT.match(line):
            counts[m.group(1)] = int(m.group(2))
    res.summary_seen = plan is not None and top_results >= plan and (plan > 0 or not res.statuses)
    if "pass" in counts:
        res.counts = {"passed": counts["pass"], "failed": counts.get("fail", 0) + counts.get("cancelled", 0),
                      "skipped": counts.get("skipped", 0) + counts.get("todo", 0), "error": 0}
    return res


# Debian's mocha prints "undefined" where the check mark belongs (its log-symbols lookup fails)
_MOCHA_PASS = re.compile(r"^(?:✓|✔|√|undefined) (.+?)(?: \(\d+ms\))?$")
_MOCHA_FAIL = re.compile(r"^\d+\) (.+)$")
_MOCHA_SUMMARY = re.compile(r"^\s+(\d+) (passing|pending|failing)\b")
# mocha 1.x: "✔ 11 tests complete (24 ms)" and "• 1 test pending", or "✖ 2 of 11 tests failed:"
# (of all tests, pending ones included; its pending count is then not printed)
_MOCHA1_SUMMARY = re.compile(r"^\s+(?:\S\s+)?(?:(\d+) tests? (complete|pending)\b|(\d+) of (\d+) tests? failed)")
# mocha 1.x's spec reporter writes "◦ title: " and then overwrites that line ("ESC[2K ESC[0G")
_OVERWRITTEN = re.compile(r"^[^\n]*(?:\x1b\[0G|\r(?!\n))", re.M)


def _mocha1_counts(m: re.Match, counts: dict, pending: int) -> None:
    if m.group(2):
        counts[m.group(2)] = int(m.group(1))
    else:
        counts["failing"], counts["total"] = int(m.group(3)), int(m.group(4))
    if "complete" in counts:
        counts["passing"] = counts["complete"] - counts.get("pending", 0)
    elif "total" in counts:
        counts["pending"] = pending
        counts["passing"] = counts["total"] - counts["failing"] - pending


def parse_mocha(log: str) -> ParseResult:
    res = ParseResult("mocha")
    suites: list[str] = []
    counts: dict[str, int] = {}
    for line in clean(_OVERWRITTEN.sub("", log)).splitlines():
        if m := _MOCHA_SUMMARY.match(line):
            counts[m.group(2)] = int(m.group(1))
            res.summary_seen = res.summary_seen or m.group(2) == "passing"
            continue
        if m := _MOCHA1_SUMMARY.match(line):
            _mocha1_counts(m, counts, sum(s == SKIPPED for s in res.statuses.values()))
            res.summary_seen = True
            continue
        if res.summary_seen or not line.strip():
            continue  # the failure details after the summary repeat titles
        indent = len(line) - len(line.lstrip(" "))
        level = max(indent // 2 - 1, 0)
        text = line.strip()
        parents = suites[:level]
        if m := _MOCHA_PASS.match(text):
            res.add(" ".join(parents + [m.group(1)]), PASSED)
        elif m := _MOCHA_FAIL.match(text):
            res.add(" ".join(parents + [m.group(1)]), FAILED)
        elif text.startswith("- "):
            res.add(" ".join(parents + [text[2:]]), SKIPPED)
        elif indent >= 2:
            suites = parents + [text]
    if counts:
        res.counts = {"passed": counts.get("passing", 0), "failed": counts.get("failing", 0),
                      "skipped": counts.get("pending", 0), "error": 0}
    return res


_JEST_FILE = re.compile(r"^(PASS|FAIL) (\S+)")
_JEST_TEST = re.compile(r"^(✓|✕|○|✎|√|×) (?:(skipped|todo) )?(.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$")
_JEST_TESTS = re.compile(r"^Tests:\s+(.*)\b(\d+) total")


def parse_jest(log: str) -> ParseResult:
    res = ParseResult("jest")
    suites: list[str] = []
    in_file = False
    for line in clean(log).splitlines():
        if _JEST_FILE.match(line):
            in_file, suites = True, []
            continue
        if m := _JEST_TESTS.match(line):
            res.summary_seen = True
            c = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|todo)", m.group(1))}
            res.counts = {"passed": c.get("passed", 0), "failed": c.get("failed", 0),
                          "skipped": c.get("skipped", 0) + c.get("todo", 0), "error": 0}
            continue
        stripped = line.strip()
        if not in_file or not stripped:
            continue
        if stripped.startswith("●") or line.startswith(("Test Suites:", "Snapshots:")):
            in_file = False  # failure details follow
            continue
        indent = len(line) - len(line.lstrip(" "))
        level = max(indent // 2 - 1, 0)
        parents = suites[:level]
        if m := _JEST_TEST.match(stripped):
            mark = m.group(1)
            status = PASSED if mark in "✓√" else FAILED if mark in "✕×" else SKIPPED
            res.add(" ".join(parents + [m.group(3)]), status)
        elif indent >= 2:
            suites = parents + [stripped]
    return res


_VITEST_LINE = re.compile(r"^\s*(✓|√|×|✗|↓|✕|○) (.+?)(?: \[skipped\])?(?: \d+(?:\.\d+)?\s?m?s)?$")
_VITEST_TESTS = re.compile(r"^\s*Tests\s+(.*)\((\d+)\)")


def parse_vitest(log: str) -> ParseResult:
    """``--reporter=verbose`` lines: ``✓ file > suite > test 3ms`` (file-level lines have no `` > ``)."""
    res = ParseResult("vitest")
    for line in clean(log).splitlines():
        if m := _VITEST_TESTS.match(line):
            res.summary_seen = True
            c = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|todo)", m.group(1))}
            res.counts = {"passed": c.get("passed", 0), "failed": c.get("failed", 0),
                          "skipped": c.get("skipped", 0) + c.get("todo", 0), "error": 0}
            continue
        if (m := _VITEST_LINE.match(line)) and " > " in m.group(2):
            mark = m.group(1)
            status = PASSED if mark in "✓√" else SKIPPED if mark in "↓○" else FAILED
            res.add(re.sub(r" \(\d+ tests?\)$", "", m.group(2)), status)
    return res
