"""An LLM-written parser where no built-in one reads a runner's log (parser_fallback).

The runner is real: a repository's own ``runtests.py`` printing a format no built-in parser knows
(``checks.py:check_a ... fine``), run for real (on the host for the quick tests, in Docker for the
end-to-end one). The endpoint is the scripted HTTP server: a vacuous candidate (everything passed)
and a right one. The truth is the exit codes of single-test runs with an instance's test patch
applied, whose new check fails before its fix.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.llm import LLMClient, LLMConfig
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment import parser_fallback
from swe_envs.envs.parsers import detect_runner, parse_log
from swe_envs.sandbox import RunLog, SandboxResult
from tests.support.scripted_server import Reply
from tests.swe_envs.envs.regen_fixtures import make_git

RUNTESTS = '''"""This project's own runner: every check_* function of the files named (default checks.py)."""
import importlib.util
import sys

args = sys.argv[1:]
one = args[1] if args[:1] == ["--one"] else None  # --one FILE:NAME runs one check
files = [one.split(":")[0]] if one else [a for a in args if a.endswith(".py")] or ["checks.py"]
fine = broken = 0
for path in files:
    spec = importlib.util.spec_from_file_location(path[:-3].replace("/", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in sorted(n for n in dir(mod) if n.startswith("check_")):
        if one and f"{path}:{name}" != one:
            continue
        try:
            getattr(mod, name)()
            print(f"{path}:{name} ... fine")
            fine += 1
        except Exception:
            print(f"{path}:{name} ... BROKEN")
            broken += 1
print(f"## {fine} fine, {broken} broken")
sys.exit(1 if broken or not fine else 0)
'''
FILES = {"runtests.py": RUNTESTS, "lib.py": "VALUE = 1\n",
         "checks.py": "import lib\n\n\ndef check_value():\n    assert lib.VALUE >= 1\n\n\n"
                      "def check_sum():\n    assert 1 + 1 == 2\n"}
# an instance: its test patch adds a check of the fix, which fails before it
TEST_PATCH = ("--- a/checks.py\n+++ b/checks.py\n@@ -7,3 +7,7 @@\n \n def check_sum():\n     assert 1 + 1 == 2\n"
              "+\n+\n+def check_two():\n+    assert lib.VALUE == 2\n")
FIX_PATCH = "--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"

GOOD = r'''```python
import re

def parse(log):
    out = {}
    for m in re.finditer(r"^(\S+:\w+) \.\.\. (fine|BROKEN)$", log, re.M):
        out[m.group(1)] = "passed" if m.group(2) == "fine" else "failed"
    m = re.search(r"^## (\d+) fine, (\d+) broken$", log, re.M)
    return {"tests": out, "summary": {"passed": int(m.group(1)), "failed": int(m.group(2))} if m else None}
```'''
VACUOUS = r'''```python
import re

def parse(log):
    return {"tests": {m: "passed" for m in re.findall(r"^(\S+:\w+) \.\.\.", log, re.M)},
            "summary": True if "## " in log else None}
```'''


class HostSandbox:
    """Runs a command in a fresh copy of the project with its patches applied, as the container does."""

    def __init__(self, project: Path):
        self.project, self.commands = project, []

    def run(self, image, command, patches, runs=1, timeout_s=None, network=None):
        self.commands.append(command)
        out = SandboxResult()
        for _ in range(runs):
            work = self.project.parent / "run"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(self.project, work)
            for _name, text in patches:
                subprocess.run(["git", "apply", "-"], input=text, text=True, cwd=work, check=True)
            proc = subprocess.run(command, shell=True, cwd=work, capture_output=True, text=True, timeout=60)
            out.runs.append(RunLog(proc.stdout + proc.stderr, proc.returncode, False))
        return out


def _reply(text: str) -> Reply:
    return Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})


@pytest.fixture
def project(tmp_path):
    return make_git(tmp_path / "proj", FILES)[0]


def _cfg(url: str | None, single: bool = True) -> SweEnvsConfig:
    cfg = SweEnvsConfig()
    cfg.llm_parser.timeout_s, cfg.llm_parser.rounds = 5, 2
    if url:
        cfg.llm_parser.llm = LLMConfig(base_url=url, cache_dir=None, max_retries=0)
    if single:
        cfg.validation.single_test_commands["o/r"] = f"{sys.executable} runtests.py --one {{test}}"
    return cfg


def test_the_runner_is_one_no_built_in_parser_reads(project):
    log = HostSandbox(project).run("img", f"{sys.executable} runtests.py checks.py", [("test", TEST_PATCH)]).runs[0]
    assert "checks.py:check_two ... BROKEN" in log.log and log.rc == 1
    assert detect_runner(log.log) is None
    assert parser_fallback.wanted("auto", parse_log("auto", log.log), log.log)
    assert not parser_fallback.wanted("pytest-swebench", parse_log("pytest-swebench", log.log), log.log)


def test_a_vacuous_candidate_is_refused_and_a_right_one_accepted(project, scripted_server, tmp_path):
    server, url = scripted_server
    server.script.extend([_reply(VACUOUS), _reply(GOOD)])
    cfg, sandbox = _cfg(url), HostSandbox(project)
    fb, code = parser_fallback.ask(LLMClient(cfg.llm_parser.llm), cfg, "o/r", sandbox, "img",
                                   f"{sys.executable} runtests.py checks.py", [("test", TEST_PATCH)], "none",
                                   tmp_path / "parsers")
    assert fb.asked and fb.accepted, fb
    assert [a["accepted"] for a in fb.attempts] == [False, True]
    # the single-test truth holds the new check failing: "everything passed" disagrees with it
    assert "checks.py:check_two (passed != failed)" in fb.attempts[0]["reasons"][0]
    assert "exit codes of 3 single-test run(s)" in fb.truth and "test patch applied" in fb.truth
    assert Path(fb.path) == tmp_path / "parsers" / "o__r.py" and "def parse" in code
    # the three checks were each run alone, after the test patch
    assert sum("--one" in c for c in sandbox.commands) == 6  # 3 per candidate
    # the rejection's reasons went back to the endpoint
    assert "passed != failed" in server.received[1]["messages"][-1]["content"]
    log = sandbox.run("img", f"{sys.executable} runtests.py checks.py", [("test", TEST_PATCH)]).runs[0].log
    assert parse_log(f"file:{fb.path}", log).statuses == {
        "checks.py:check_sum": "passed", "checks.py:check_two": "failed", "checks.py:check_value": "passed"}
    # found again with a cached image: its label's code, written where the runs read it
    again = parser_fallback.restore(code, "o/r", tmp_path / "elsewhere")
    assert again.accepted and Path(again.path).read_text() == code


def test_without_a_failing_test_no_candidate_can_be_accepted(project, scripted_server, tmp_path):
    """No test patch: every check passes alone, and a truth without a failure accepts nothing."""
    server, url = scripted_server
    server.script.extend([_reply(GOOD), _reply(GOOD)])
    cfg = _cfg(url)
    fb, code = parser_fallback.ask(LLMClient(cfg.llm_parser.llm), cfg, "o/r", HostSandbox(project), "img",
                                   f"{sys.executable} runtests.py checks.py", [], "none", tmp_path / "parsers")
    assert fb.asked and not fb.accepted and code == ""
    assert "0 failing and 2 passing" in fb.attempts[0]["reasons"][0]
    assert not (tmp_path / "parsers" / "o__r.py").exists()


def test_off_without_an_endpoint_and_not_asked_without_a_truth(project, scripted_server, tmp_path):
    server, url = scripted_server
    cmd = f"{sys.executable} runtests.py checks.py"
    fb, _ = parser_fallback.ask(None, _cfg(None), "o/r", HostSandbox(project), "img", cmd, [], "none", tmp_path)
    assert not fb.asked and fb.reason.startswith("off: no LLM endpoint is configured (llm_parser.llm)")
    cfg = _cfg(url, single=False)
    fb, _ = parser_fallback.ask(LLMClient(cfg.llm_parser.llm), cfg, "o/r", HostSandbox(project), "img", cmd, [],
                                "none", tmp_path)
    assert not fb.asked and "validation.single_test_commands['o/r']" in fb.reason
    assert server.received == []


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
@pytest.mark.docker
def test_validate_end_to_end_with_the_repositorys_own_runner_and_an_llm_parser(docker_ready, scripted_server, tmp_path):
    """pytest collects nothing from checks.py; the builder switches to the tree's runtests.py (own runner),
    no built-in parser reads its log, the scripted LLM's parser is accepted against single-test exit
    codes, and validate finds the instance's FAIL_TO_PASS with it."""
    from swe_envs.envs.validate.job import validate_instances

    server, url = scripted_server
    server.script.extend([_reply(GOOD)])
    repos = tmp_path / "repos"
    repo, head = make_git(repos / "o" / "r", FILES)
    inst = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": head, "patch": FIX_PATCH,
            "test_patch": TEST_PATCH, "created_at": "2023-05-01T00:00:00Z", "version": "1.0"}
    (tmp_path / "instances.jsonl").write_text(json.dumps(inst) + "\n")
    cfg = _cfg(url)
    cfg.validation.single_test_commands["o/r"] = "python runtests.py --one {test}"
    res = validate_instances(tmp_path / "instances.jsonl", repos, tmp_path / "out", cfg)
    env = json.loads((tmp_path / "out" / "environments.jsonl").read_text().splitlines()[0])
    assert env["ok"], env["reason"]
    assert env["own_runner"] == "runtests.py"
    assert env["llm_parser"]["accepted"] and env["runner"] == f"file:{tmp_path / 'out' / 'parsers' / 'o__r.py'}"
    assert res.validated == 1, (tmp_path / "out" / "failures.jsonl").read_text()
    row = json.loads((tmp_path / "out" / "validated.jsonl").read_text())
    assert json.loads(row["FAIL_TO_PASS"]) == ["checks.py:check_two"]
    assert sorted(json.loads(row["PASS_TO_PASS"])) == ["checks.py:check_sum", "checks.py:check_value"]
