"""Every language end to end: build -> run -> parse -> exactly the expected F2P / P2P lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samples.swe_envs.lang_repos import ALL
from swe_envs.envs.parsers import parse_log

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("language", list(ALL))
def test_language_f2p_p2p_exact(lang_batch, language):
    spec = ALL[language]
    rec = lang_batch["validated"].get(f"tests__calc-{language}-1")
    assert rec is not None, f"not validated: {lang_batch['failures']}\n{lang_batch['stdout']}"
    assert json.loads(rec["FAIL_TO_PASS"]) == spec.f2p
    assert json.loads(rec["PASS_TO_PASS"]) == spec.p2p
    env = rec["environment"]
    assert env["language"] == language and env["image_id"].startswith("sha256:")
    assert rec["validation"]["flaky"] == []
    # before: the new test fails (non-zero exit), after: everything passes (exit 0), each run twice
    assert len(rec["validation"]["exit_codes"]["before"]) == 2
    assert all(rc != 0 for rc in rec["validation"]["exit_codes"]["before"])
    assert rec["validation"]["exit_codes"]["after"] == [0, 0]
    # the logs are kept, and parsing them again gives the same statuses
    for phase, expected in (("before", {**dict.fromkeys(spec.f2p, "failed"), **dict.fromkeys(spec.p2p, "passed")}),
                            ("after", dict.fromkeys(spec.f2p + spec.p2p, "passed"))):
        for log_path in rec["logs"][phase]:
            statuses = parse_log(env["runner"], Path(log_path).read_text()).statuses
            assert statuses == expected, (phase, log_path)
    # SWE-bench fields pass through untouched
    for key in ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "created_at"):
        assert key in rec


def test_one_image_per_repo_version(lang_batch):
    a, b = lang_batch["validated"]["tests__calc-python-1"], lang_batch["validated"]["tests__calc-python-2"]
    assert a["environment"]["image_id"] == b["environment"]["image_id"]
    envs = [e for e in lang_batch["environments"] if e["repo"] == "tests/calc-python"]
    assert len(envs) == 1 and sorted(envs[0]["instances"]) == ["tests__calc-python-1", "tests__calc-python-2"]
    assert len(lang_batch["environments"]) == len(ALL)


def test_summary_and_attempts(lang_batch):
    assert lang_batch["failures"] == []
    langs = lang_batch["summary"]["languages"]
    assert set(langs) == set(ALL)
    for lang, d in langs.items():
        assert d["build_success_rate"] == 1.0 and d["validated"] == d["tasks"], lang
        assert d["seconds_per_environment"] is not None
    for env in lang_batch["environments"]:
        # the template recipe alone builds every test repo: one round, deterministic, no endpoint
        # ("cache": verified by an earlier run with that same recipe)
        assert env["ok"] and len(env["attempts"]) == 1 and env["attempts"][0]["stage"] == "ok"
        assert env["attempts"][0]["source"] in ("template", "cache")
        assert env["env_layer_bytes"] < env["image_bytes"]


_PARSER = ("import re\ndef parse(log):\n    tests = {m[0]: m[1].lower() for m in "
           "re.findall(r'^(\\S+::\\S+) (PASSED|FAILED)', log, re.M)}\n"
           "    return {'tests': tests, 'summary': True if re.search(r'^=+ .* in [\\d.]+s', log, re.M) else None}\n")
_IDS = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_sub"]
_SINGLE = "python -m pytest -q -p no:cacheprovider {test}"


def test_llm_parser_checked_against_single_test_exit_codes(lang_batch, docker_ready):
    """Truth from exit codes of single-test runs in the real environment image, in the before state."""
    from swe_envs.config import LLMParserConfig, SandboxConfig
    from swe_envs.envs.parsers.llm import check_parser, truth_from_single_runs
    from swe_envs.sandbox import Sandbox

    rec = lang_batch["validated"]["tests__calc-python-1"]
    sandbox = Sandbox(docker_ready, SandboxConfig())
    truth = truth_from_single_runs(sandbox, rec["environment"]["image"], _SINGLE, _IDS,
                                   patches=[("test", rec["test_patch"])])
    assert truth == {"tests/test_calc.py::test_add": "passed", "tests/test_calc.py::test_sub": "failed"}
    log = Path(rec["logs"]["before"][0]).read_text()  # the run whose statuses the truth must confirm
    assert check_parser(_PARSER, [(log, truth)], LLMParserConfig()).accepted
    assert not check_parser(_PARSER.replace("m[1].lower()", "'passed'"), [(log, truth)], LLMParserConfig()).accepted


def test_validate_checks_a_file_parser_by_single_test_runs(lang_batch, docker_ready, tmp_path):
    """validate with an LLM-written parser and no JUnit XML: single-test exit codes decide whether it is trusted."""
    from swe_envs.config import SweEnvsConfig
    from swe_envs.envs.environment.builder import Environment
    from swe_envs.envs.validate.validator import InstanceFailure, Validator
    from swe_envs.sandbox import Sandbox

    rec = lang_batch["validated"]["tests__calc-python-1"]
    inst = {k: v for k, v in rec.items() if k not in ("environment", "validation", "logs", "image", "image_id")}
    repo = lang_batch["out"].parent / "repos" / "tests" / "calc-python"
    cfg = SweEnvsConfig()
    cfg.validation.single_test_commands = {inst["repo"]: _SINGLE}
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(_PARSER)
    bad.write_text(_PARSER.replace("m[1].lower()", "'passed'"))
    sandbox = Sandbox(docker_ready, cfg.sandbox)
    spec = rec["environment"]

    def env(parser):
        return Environment(inst["repo"], inst["base_commit"], "python", True, image=spec["image"],
                           image_id=spec["image_id"], test_command=spec["test_command"], runner=f"file:{parser}")

    out = Validator(sandbox, 1, True, None, cfg=cfg).validate(inst, env(good), repo)
    assert json.loads(out["FAIL_TO_PASS"]) == ALL["python"].f2p
    with pytest.raises(InstanceFailure, match="disagrees with exit codes of 2 single-test run"):
        Validator(sandbox, 1, True, None, cfg=cfg).validate(inst, env(bad), repo)
    cfg.validation.single_test_commands = {}
    with pytest.raises(InstanceFailure, match="cannot be checked"):
        Validator(sandbox, 1, True, None, cfg=cfg).validate(inst, env(good), repo)
