"""Bad input: each problem is one recorded failure with its reason; nothing else in the batch is lost."""

from __future__ import annotations

import json

import pytest
import yaml

from samples.swe_envs.lang_repos import PY, make_repo
from tests.swe_envs.envs import bad_repos
from tests.swe_envs.envs.conftest import read_jsonl, run_cli, write_jsonl


@pytest.fixture(scope="module")
def bad_batch(docker_ready, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    repos = root / "repos"
    good = make_repo(repos, PY, "good")
    hang = make_repo(repos, bad_repos.HANG, "hang")
    flaky = make_repo(repos, bad_repos.FLAKY, "flaky")
    no_build = make_repo(repos, bad_repos.NO_BUILD, "nobuild")
    fake = make_repo(repos, bad_repos.FAKE_PASS, "fakepass")
    crash = make_repo(repos, bad_repos.PARSER_CRASH, "parsercrash")
    no_apply = make_repo(repos, bad_repos.NO_APPLY, "noapply")
    no_apply["test_patch"] = no_apply["test_patch"].replace("from calc import add\n", "from calc import add, mul\n")
    missing_repo = dict(good, instance_id="tests__ghost-1", repo="tests/ghost")
    missing_commit = dict(good, instance_id="tests__good-2", base_commit="0" * 40, environment_setup_commit="0" * 40)
    records = [good, hang, flaky, no_build, fake, crash, no_apply, missing_repo, missing_commit,
               "{not json", json.dumps({"instance_id": "tests__nofields-1", "repo": "tests/good"})]
    parser = root / "crash_parser.py"
    parser.write_text("def parse(log):\n    raise RuntimeError('this parser is broken')\n")
    cfg = {"sandbox": {"test_timeout_s": 20},  # the hang test sleeps far longer; a loaded host still runs pytest
           "validation": {"test_commands": {"tests/fakepass": "python -m pytest -rA -v -p no:cacheprovider; exit 0"},
                          "parsers": {"tests/parsercrash": f"file:{parser}"}}}
    (root / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    out = root / "out"
    proc = run_cli("validate", "--instances", str(write_jsonl(root / "in.jsonl", records)), "--repos", str(repos),
                   "--output", str(out), "--config", str(root / "cfg.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fails = {f["instance_id"]: f for f in read_jsonl(out / "failures.jsonl")}
    return {"validated": {r["instance_id"]: r for r in read_jsonl(out / "validated.jsonl")}, "failures": fails,
            "docker": docker_ready}


pytestmark = pytest.mark.docker


def test_good_and_flaky_instances_survive(bad_batch):
    assert set(bad_batch["validated"]) == {"tests__good-1", "tests__flaky-1"}
    flaky = bad_batch["validated"]["tests__flaky-1"]
    assert json.loads(flaky["FAIL_TO_PASS"]) == ["tests/test_calc.py::test_sub"]
    assert json.loads(flaky["PASS_TO_PASS"]) == ["tests/test_calc.py::test_add"]
    assert flaky["validation"]["flaky"] == ["tests/test_calc.py::test_flips"]


@pytest.mark.parametrize("iid, stage, words", [
    ("tests__hang-1", "before", "time limit"),
    ("tests__nobuild-1", "environment", "did not build after 1 round"),
    ("tests__fakepass-1", "before", "exit code 0 but 1 failing test"),
    ("tests__parsercrash-1", "environment", "this parser is broken"),
    ("tests__noapply-1", "patch", "test_patch does not apply"),
    ("tests__ghost-1", "repository", "not found"),
    ("tests__good-2", "repository", "commit not found"),
    ("in.jsonl:10", "read", "malformed JSON"),
    ("tests__nofields-1", "read", "missing field(s): base_commit, patch, test_patch"),
])
def test_each_bad_input_is_one_recorded_failure(bad_batch, iid, stage, words):
    f = bad_batch["failures"][iid]
    assert f["stage"] == stage and words in f["reason"], f


def test_failures_are_exactly_the_bad_inputs(bad_batch):
    assert len(bad_batch["failures"]) == 9


def test_no_container_left(bad_batch):
    from swe_envs.sandbox import LABEL

    # this batch's repositories only: other runs on a shared engine carry the same label
    left = bad_batch["docker"].containers.list(all=True, filters={"label": LABEL})
    assert [c for c in left if c.labels.get("swe_envs.repo", "").startswith("tests/")] == []
