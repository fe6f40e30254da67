"""JavaScript runners' parsers (``swe_envs/envs/parsers/js.py``) on what old runners print."""

from __future__ import annotations

from swe_envs.envs.parsers import FAILED, PASSED, SKIPPED, parse_log

# node-after 0.8.2 (Debian source, orig tarball) under its own devDependency mocha ~1.8.1, as the
# benchmark's run logged it: the spec reporter writes "◦ title: " and overwrites the line
MOCHA1_PASS = ("\n\n  ◦ exists: \x1b[2K\x1b[0G  ✓ exists \n"
               "  ◦ after 1: \x1b[2K\x1b[0G  ✓ after 1 \n"
               "  ◦ throws on too many calls: \x1b[2K\x1b[0G  ✓ throws on too many calls \n"
               "\n  3 tests complete (24 ms)\n\n")


def test_mocha1_spec_reporter_with_overwritten_lines_and_its_own_summary():
    res = parse_log("mocha", MOCHA1_PASS)
    assert res.statuses == {"exists": PASSED, "after 1": PASSED, "throws on too many calls": PASSED}
    assert res.summary_seen and res.counts == {"passed": 3, "failed": 0, "skipped": 0, "error": 0}
    # without a terminal the reporter returns to column 0 with a bare carriage return
    res = parse_log("mocha", MOCHA1_PASS.replace("\x1b[2K\x1b[0G", "\r"))
    assert len(res.statuses) == 3 and res.counts["passed"] == 3


def test_mocha1_failures_and_pending_from_its_epilogue():
    # mocha 1.x's epilogue: "✖ F of T tests failed:" (T counts pending tests; then no pending line)
    log = ("\n  suite\n    ◦ a: \x1b[2K\x1b[0G    ✓ a \n    ◦ b: \x1b[2K\x1b[0G    1) b\n    - c\n\n"
           "  ✖ 1 of 3 tests failed:\n\n  1) suite b:\n     Error: boom\n      at x (/testbed/test.js:1:1)\n\n")
    res = parse_log("mocha", log)
    assert res.statuses == {"suite a": PASSED, "suite b": FAILED, "suite c": SKIPPED}
    assert res.counts == {"passed": 1, "failed": 1, "skipped": 1, "error": 0}
    log = "\n  ◦ a: \x1b[2K\x1b[0G  ✓ a \n  - c\n\n  ✔ 2 tests complete (3ms)\n  • 1 test pending\n\n"
    assert parse_log("mocha", log).counts == {"passed": 1, "failed": 0, "skipped": 1, "error": 0}


def test_mocha_today_is_unchanged():
    log = "\n  suite\n    ✔ a\n    1) b\n\n  1 passing (3ms)\n  1 failing\n\n  1) suite\n       b:\n     Error\n"
    res = parse_log("mocha", log)
    assert res.statuses == {"suite a": PASSED, "suite b": FAILED}
    assert res.counts == {"passed": 1, "failed": 1, "skipped": 0, "error": 0}


# node-inherits 2.0.4 under its own devDependency tap (node-tap 14): each file a subtest whose
# result comes first, its assertions in braces after it
NODE_TAP_BRACES = """TAP version 13
ok 1 - test/browser.js # time=15346.489ms {
    ok 1 - should be equal
    ok 2 - type is Child
    1..2
    # time=79.221ms
}

not ok 2 - test/old.js # time=5283.3ms {
    ok 1 - should be equal
    not ok 2 - type is Parent
      ---
      at: {line: 3}
      ...
    1..2
}

1..2
# time=16627.816ms
"""


def test_node_tap_subtests_in_braces_name_their_assertions():
    res = parse_log("tap", NODE_TAP_BRACES)
    assert res.statuses == {"test/browser.js": PASSED, "test/browser.js > should be equal": PASSED,
                            "test/browser.js > type is Child": PASSED, "test/old.js": FAILED,
                            "test/old.js > should be equal": PASSED, "test/old.js > type is Parent": FAILED}
    assert res.summary_seen
