"""LLM-generated parsers: accepted only when they reproduce statuses known from elsewhere.

The logs are real (fixtures from the real runners); the endpoint is a real HTTP server: the
scripted one answering a known-good, a known-bad, a looping and a crashing parser, and our
SmolLM2 server, whose 135M model is not expected to write a correct parser.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.llm import LLMClient, LLMConfig
from swe_envs.config import LLMParserConfig
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.parsers.llm import check_parser, run_parser, run_parser_file, synthesize_parser
from tests.support.scripted_server import Reply, ScriptedServer
from tests.swe_envs.envs.conftest import run_cli

FIX = Path(__file__).parents[1] / "fixtures"

GOOD_CTEST = r'''```python
import re

def parse(log):
    out = {}
    for m in re.finditer(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*\**(\w+)", log, re.M):
        word = m.group(2)
        out[m.group(1)] = "passed" if word == "Passed" else "skipped" if word == "Skipped" else "failed"
    summary = True if re.search(r"tests passed, \d+ tests? failed out of \d+", log) else None
    return {"tests": out, "summary": summary}
```'''
BAD_ALL_PASSED = "```python\nimport re\n\ndef parse(log):\n    return {n: 'passed' for n in re.findall(r'Test\\s+#\\d+: (\\S+)', log)}\n```"
LOOPING = "```python\ndef parse(log):\n    while True:\n        pass\n```"
CRASHING = "```python\ndef parse(log):\n    return log['nope']\n```"
# pytest's console lines mapped to the ids pytest's JUnit XML uses (the truth for this log)
GOOD_PYTEST_CONSOLE = r'''```python
import re

def parse(log):
    kinds = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped", "ERROR": "error"}
    out = {}
    for m in re.finditer(r"^(\S+?)\.py::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", log, re.M):
        out[m.group(1).replace("/", ".") + "." + m.group(2).replace("::", ".")] = kinds[m.group(3)]
    summary = True if re.search(r"^=+ .* in [\d.]+s", log, re.M) else None
    return {"tests": out, "summary": summary}
```'''


def _reply(text: str) -> Reply:
    return Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})


def _case(name: str) -> tuple[str, dict[str, str]]:
    return (FIX / f"{name}.log").read_text(), json.loads((FIX / f"{name}.json").read_text())["expected"]


@pytest.fixture
def scripted():
    server = ScriptedServer()
    url = server.start()
    yield server, LLMClient(LLMConfig(base_url=url, cache_dir=None, max_retries=0))
    server.stop()


CFG = LLMParserConfig(timeout_s=5, rounds=3)


def test_known_good_parser_is_accepted(scripted):
    server, client = scripted
    server.script.append(_reply(GOOD_CTEST))
    res = synthesize_parser(client, "my-runner", [_case("ctest")], CFG)
    assert res.accepted and len(res.attempts) == 1
    assert run_parser(res.code, _case("ctest")[0]) == _case("ctest")[1]
    assert "my-runner" in server.received[0]["messages"][-1]["content"]


def test_bad_looping_and_crashing_parsers_are_rejected_then_fixed(scripted):
    server, client = scripted
    for text in (BAD_ALL_PASSED, LOOPING, CRASHING):
        server.script.append(_reply(text))
    res = synthesize_parser(client, "my-runner", [_case("ctest")], CFG)
    assert not res.accepted and len(res.attempts) == 3
    bad, loop, crash = (a.reasons[0] for a in res.attempts)
    assert "wrong status for" in bad and "fails (passed != failed)" in bad
    assert "timeout" in loop
    assert "crash" in crash and "TypeError" in crash
    # each rejection went back to the endpoint
    assert "wrong status" in server.received[1]["messages"][-1]["content"]
    server.script.append(_reply(GOOD_CTEST))
    again = synthesize_parser(client, "my-runner", [_case("ctest")], LLMParserConfig(timeout_s=5, rounds=1))
    assert again.accepted


def test_a_parser_must_hold_on_every_known_log(scripted):
    """Right on one log is not enough: the cargo log is not CTest's format."""
    cases = [_case("ctest"), _case("cargo")]
    verdict = check_parser(GOOD_CTEST.split("```python\n")[1].rstrip("`\n"), cases, CFG)
    assert not verdict.accepted and verdict.reasons[0] == "log 2: empty result (no test parsed)"


def test_make_parser_cli_with_junit_xml_truth(scripted, tmp_path):
    server, _ = scripted
    server.script.append(_reply(GOOD_PYTEST_CONSOLE))
    log = (FIX / "pytest-junit.log").read_text()
    console, xml = log.split("----- JUnit XML report")
    (tmp_path / "console.log").write_text(console)
    (tmp_path / "report.xml").write_text(xml.split("\n", 1)[1])
    url = f"http://127.0.0.1:{server.httpd.server_address[1]}/v1"
    proc = run_cli("make-parser", "--runner", "pytest-console", "--log", str(tmp_path / "console.log"),
                   "--truth", str(tmp_path / "report.xml"), "--endpoint", url, "--out", str(tmp_path / "p.py"),
                   timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = json.loads((FIX / "pytest-junit.json").read_text())["expected"]
    assert run_parser_file(tmp_path / "p.py", console).statuses == expected
    # and as a runner of the parse command
    proc = run_cli("parse", "--runner", f"file:{tmp_path / 'p.py'}", str(tmp_path / "console.log"), timeout=60)
    assert json.loads(proc.stdout) == expected


def test_make_parser_cli_refuses_a_wrong_parser(scripted, tmp_path):
    server, _ = scripted
    server.script.extend([_reply(BAD_ALL_PASSED)] * 2)
    log, truth = _case("ctest")
    (tmp_path / "l.log").write_text(log)
    (tmp_path / "t.json").write_text(json.dumps(truth))
    url = f"http://127.0.0.1:{server.httpd.server_address[1]}/v1"
    proc = run_cli("make-parser", "--runner", "x", "--log", str(tmp_path / "l.log"), "--truth", str(tmp_path / "t.json"),
                   "--endpoint", url, "--out", str(tmp_path / "p.py"), timeout=120)
    assert proc.returncode == 2 and "no parser accepted" in proc.stderr
    assert not (tmp_path / "p.py").exists()


def test_smollm2_candidate_is_judged_by_the_known_statuses(llm_server):
    client = LLMClient(LLMConfig(base_url=llm_server, model="smollm2", cache_dir=None, timeout_s=600, max_retries=0))
    log, truth = _case("cargo")
    res = synthesize_parser(client, "cargo-like", [(log, truth)], LLMParserConfig(rounds=1, max_tokens=96, max_log_chars=1200))
    assert len(res.attempts) == 1
    if res.accepted:  # unlikely from 135M parameters, but then it must really be right
        assert run_parser(res.code, log) == truth == parse_log("cargo", log).statuses
    else:
        assert res.attempts[0].reasons and res.error
