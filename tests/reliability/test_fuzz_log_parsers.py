"""Fuzzing every built-in test-log parser with real runner logs (tests/swe_envs/envs/fixtures,
recorded from the real runners) cut, spliced, duplicated and sprinkled with garbage, plus
pathological lines (very long, no newline, ANSI storms). A test suite's output is untrusted:
properties are no crash, statuses only from the four known ones, and a bounded parse time
(catastrophic regex backtracking would show as a hang)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swe_envs.envs.parsers import RUNNERS, STATUSES, parse_log
from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import TEXT

FIXTURES = Path(__file__).resolve().parents[1] / "swe_envs" / "envs" / "fixtures"
LOGS = {p.stem: p.read_text(encoding="utf-8", errors="replace") for p in sorted(FIXTURES.glob("*.log"))}
# a generous bound for a ≤ 256 KB log on a loaded 2-core machine: real logs parse in milliseconds,
# a backtracking regex takes minutes
HANG_S = 20.0


@st.composite
def hostile_log(draw) -> tuple[str, int]:
    base = draw(st.sampled_from(sorted(LOGS)))
    lines = LOGS[base].splitlines(keepends=True)
    faults = 0
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["cut", "drop", "dup", "garbage", "splice", "long", "ansi", "crlf"]))
        faults += 1
        at = draw(st.integers(min_value=0, max_value=max(0, len(lines) - 1)))
        if op == "cut":
            lines = lines[:at]
        elif op == "drop" and lines:
            del lines[at]
        elif op == "dup" and lines:
            lines[at:at] = lines[at: at + draw(st.integers(min_value=1, max_value=20))] * draw(
                st.integers(min_value=2, max_value=50))
        elif op == "garbage":
            lines.insert(at, draw(TEXT) + "\n")
        elif op == "splice":  # another runner's output in the middle (a suite that shells out)
            other = LOGS[draw(st.sampled_from(sorted(LOGS)))].splitlines(keepends=True)
            lines[at:at] = other[: draw(st.integers(min_value=0, max_value=len(other)))]
        elif op == "long" and lines:  # one huge line, as a test printing a blob
            piece = lines[at].rstrip("\n") or "x"
            lines[at] = piece * (200_000 // len(piece) + 1) + "\n"
        elif op == "ansi":
            lines = ["\x1b[31m\x1b[1m" + ln.replace(" ", "\x1b[0m \x1b[2K") for ln in lines]
        elif op == "crlf":
            lines = [ln.replace("\n", "\r\n") for ln in lines]
    return "".join(lines)[: 256 * 1024], faults


def _check(runner: str, log: str) -> None:
    started = time.monotonic()
    res = parse_log(runner, log)
    elapsed = time.monotonic() - started
    assert elapsed < HANG_S, f"{runner} took {elapsed:.1f}s on a {len(log)}-char log"
    assert all(isinstance(k, str) and k.strip() for k in res.statuses)
    assert set(res.statuses.values()) <= set(STATUSES)
    res.to_json()


@pytest.mark.area("test-log parsers")
@pytest.mark.timeout(600)
@fuzz_settings(ci_examples=12, long_examples=150)
@given(log=hostile_log())
def test_every_parser_survives_hostile_logs(log):
    text, faults = log
    for runner in [*RUNNERS, "auto"]:
        _check(runner, text)
    LEDGER.add("test-log parsers", tried=len(RUNNERS) + 1, faults=(len(RUNNERS) + 1) * faults)


@pytest.mark.area("test-log parsers")
@pytest.mark.timeout(600)
@fuzz_settings(ci_examples=10, long_examples=200)
@given(text=st.text(max_size=2000), runner=st.sampled_from([*RUNNERS, "auto"]))
def test_arbitrary_text(text, runner):
    _check(runner, text)
    LEDGER.add("test-log parsers", tried=1, faults=1)


@pytest.mark.area("test-log parsers")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("log", [
    "=" * 200_000,                                   # a separator line with no end
    "PASSED " * 40_000,                              # a status word repeated on one line
    "test_" + "a" * 150_000 + " ... ",               # a test id that never ends
    "<testcase " * 20_000,                           # XML that never closes
    "--- FAIL: " + "(" * 50_000,                     # go test with unbalanced parens
    "\t" * 100_000 + "ok",
    "✓ " * 50_000,
    ("test result: ok. " + "1 passed; " * 20_000),
])
def test_pathological_single_lines(log):
    for runner in [*RUNNERS, "auto"]:
        _check(runner, log)
    LEDGER.add("test-log parsers", tried=len(RUNNERS) + 1, faults=len(RUNNERS) + 1)


LAUGHS = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
          + ']><testsuite name="s" tests="1"><testcase classname="c" name="&lol9;"/></testsuite>')
SECRET = "h1-host-secret-" + "7" * 8


@pytest.mark.area("test-log parsers")
@pytest.mark.timeout(600)
def test_junit_xml_entities_neither_explode_nor_read_host_files(tmp_path):
    """A hostile suite controls its JUnit XML: a billion-laughs bomb must not expand, and an
    external entity must not pull a host file into the parsed test ids (XXE)."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    xxe = (f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file://{secret}">]>'
           '<testsuite name="s" tests="1"><testcase classname="c" name="&x;"/></testsuite>')
    for log in (LAUGHS, xxe):
        for runner in ("junit-xml", "auto"):
            _check(runner, log)
            assert SECRET not in str(parse_log(runner, log).to_json())
    LEDGER.add("test-log parsers", tried=4, faults=4)
