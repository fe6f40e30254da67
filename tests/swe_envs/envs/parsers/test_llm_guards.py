"""LLM-written parsers pass the same fake-pass guards as built-in ones, against a non-vacuous truth.

Real logs (the CTest fixture from the real runner); candidates run in the real parser sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.llm import LLMClient, LLMConfig
from swe_envs.config import LLMParserConfig
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.parsers.llm import check_parser, pick_single_tests, run_parser_file, synthesize_parser
from swe_envs.envs.validate.validator import check_run
from swe_envs.sandbox import RunLog
from tests.support.scripted_server import ScriptedServer
from tests.swe_envs.envs.conftest import run_cli

FIX = Path(__file__).parents[1] / "fixtures"
LOG = (FIX / "ctest.log").read_text()
TRUTH = json.loads((FIX / "ctest.json").read_text())["expected"]
CFG = LLMParserConfig(timeout_s=5)
_STATUSES = r'''import re

def statuses(log):
    out = {}
    for m in re.finditer(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*\**(\w+)", log, re.M):
        w = m.group(2)
        out[m.group(1)] = "passed" if w == "Passed" else "skipped" if w == "Skipped" else "failed"
    return out
'''
SUMMARY = r'''
def parse(log):
    seen = re.search(r"tests passed, \d+ tests? failed out of \d+", log)
    return {"tests": statuses(log), "summary": True if seen else None}
'''
NO_SUMMARY = "\ndef parse(log):\n    return statuses(log)\n"
ALWAYS_SUMMARY = "\ndef parse(log):\n    return {'tests': statuses(log), 'summary': True}\n"
WRONG_TOTALS = ("\ndef parse(log):\n    return {'tests': statuses(log), 'summary': "
                "{'passed': 4, 'failed': 0, 'skipped': 0, 'error': 0} if 'tests passed' in log else None}\n")
EMPTY = "def parse(log):\n    return {}\n"


def test_a_parser_that_detects_the_summary_is_accepted():
    assert check_parser(_STATUSES + SUMMARY, [(LOG, TRUTH)], CFG).accepted


def test_vacuous_truths_are_refused():
    for truth in ({}, {"passes": "passed"}, {"fails": "failed"}):
        verdict = check_parser(EMPTY, [(LOG, truth)], CFG)
        assert not verdict.accepted and "are needed to check a parser" in verdict.reasons[0], truth
    # a JUnit XML report without test cases gives an empty truth
    assert parse_log("junit-xml", '<?xml version="1.0"?><testsuites><testsuite name="x" tests="0"/></testsuites>').statuses == {}
    # configurable: one failing test and no passing one may be enough if the user says so
    lax = LLMParserConfig(timeout_s=5, min_truth_passing=0)
    assert check_parser(_STATUSES + SUMMARY, [(LOG, {"fails": "failed"})], lax).reasons[0].startswith("log 1: unexpected")


def test_empty_results_and_missing_summaries_are_refused():
    assert check_parser(EMPTY, [(LOG, TRUTH)], CFG).reasons == ["log 1: empty result (no test parsed)"]
    assert "no runner summary detected" in check_parser(_STATUSES + NO_SUMMARY, [(LOG, TRUTH)], CFG).reasons[0]
    assert "log cut in half" in check_parser(_STATUSES + ALWAYS_SUMMARY, [(LOG, TRUTH)], CFG).reasons[0]
    assert "disagree" in check_parser(_STATUSES + WRONG_TOTALS, [(LOG, TRUTH)], CFG).reasons[0]


def test_a_saved_parser_meets_the_runs_fake_pass_guard(tmp_path):
    """validate's check_run treats a file: parser like a built-in one: no summary, no trust."""
    good, bare = tmp_path / "good.py", tmp_path / "bare.py"
    good.write_text(_STATUSES + SUMMARY)
    bare.write_text(_STATUSES + NO_SUMMARY)
    run = RunLog(LOG, 8, False)
    assert check_run(run, run_parser_file(good, LOG)) is None
    assert "summary line is missing" in check_run(run, run_parser_file(bare, LOG))
    cut = "\n".join(LOG.splitlines()[:20])
    assert "summary line is missing" in check_run(RunLog(cut, 8, False), run_parser_file(good, cut))


def test_truth_too_small_is_refused_before_asking_the_endpoint(tmp_path):
    server = ScriptedServer()
    url = server.start()
    try:
        client = LLMClient(LLMConfig(base_url=url, cache_dir=None, max_retries=0))
        res = synthesize_parser(client, "x", [(LOG, {})], CFG)
        assert not res.accepted and "too few" in res.error and server.received == []
        (tmp_path / "l.log").write_text(LOG)
        (tmp_path / "t.json").write_text("{}")
        proc = run_cli("make-parser", "--runner", "x", "--log", str(tmp_path / "l.log"), "--truth",
                       str(tmp_path / "t.json"), "--endpoint", f"{url}", "--out", str(tmp_path / "p.py"), timeout=120)
        assert proc.returncode == 2 and "too few" in proc.stderr and server.received == []
    finally:
        server.stop()


def test_single_tests_mix_failing_and_passing():
    statuses = {"a": "passed", "b": "failed", "c": "passed", "d": "error", "e": "skipped"}
    assert pick_single_tests(statuses, 3) == ["b", "a", "d"]
    assert pick_single_tests(statuses, 10) == ["b", "a", "d", "c"]
