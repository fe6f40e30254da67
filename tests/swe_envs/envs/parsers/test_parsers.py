"""Built-in log parsers on real runner output (fixtures made by ``regen_fixtures.py`` in the real
toolchain containers), the fake-pass guards, and the F2P / P2P rules. No Docker needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swe_envs.envs.parsers import RUNNERS, detect_runner, parse_log
from swe_envs.envs.validate.validator import check_run, classify
from swe_envs.sandbox import RunLog
from tests.swe_envs.envs.conftest import run_cli
from tests.swe_envs.envs.fixture_projects import ALL as FIXTURES

FIX = Path(__file__).parents[1] / "fixtures"
NAMES = [f.name for f in FIXTURES]


def _fixture(name: str) -> tuple[str, dict]:
    return (FIX / f"{name}.log").read_text(), json.loads((FIX / f"{name}.json").read_text())


def test_every_fixture_is_present_and_every_language_has_one():
    assert sorted(p.stem for p in FIX.glob("*.log")) == sorted(NAMES)
    assert {f.language for f in FIXTURES} == {"python", "javascript", "java", "go", "rust", "c", "cpp", "php", "ruby"}


@pytest.mark.parametrize("name", NAMES)
def test_parser_reproduces_the_known_statuses(name):
    log, meta = _fixture(name)
    res = parse_log(meta["runner"], log)
    assert res.statuses == meta["expected"]
    assert res.summary_seen
    # the real run's exit code agrees with the parse: the guard accepts it
    assert check_run(RunLog(log, meta["exit_code"], False), res) is None


@pytest.mark.parametrize("name", NAMES)
def test_auto_detection_picks_a_parser_that_agrees(name):
    log, meta = _fixture(name)
    assert parse_log("auto", log).statuses == meta["expected"], detect_runner(log)


@pytest.mark.parametrize("name", NAMES)
def test_log_cut_before_the_summary_is_not_complete(name):
    """A suite killed before its summary line must not look complete."""
    log, meta = _fixture(name)
    lines = log.splitlines()
    first = next(k for k in range(1, len(lines) + 1) if parse_log(meta["runner"], "\n".join(lines[:k])).summary_seen)
    assert not parse_log(meta["runner"], "\n".join(lines[: first - 1])).summary_seen


def test_samples_for_runners_not_runnable_offline():
    vitest = parse_log("vitest", (FIX / "samples" / "vitest.log").read_text())
    assert vitest.statuses == {"test/calc.test.ts > calc > adds": "passed", "test/calc.test.ts > calc > subtracts": "failed",
                               "test/calc.test.ts > calc > divides": "skipped", "test/util.test.ts > util > trims": "passed"}
    assert vitest.summary_seen and vitest.counts == {"passed": 2, "failed": 1, "skipped": 1, "error": 0}
    gradle = parse_log("gradle", (FIX / "samples" / "gradle.log").read_text())
    assert gradle.statuses == {"calc.CalcTest.adds": "passed", "calc.CalcTest.subtracts": "failed",
                               "calc.CalcTest.divides": "skipped"}
    assert gradle.summary_seen


def test_surefire_console_without_reports_names_failures_only():
    log, _ = _fixture("surefire")
    console = log.split("----- JUnit XML report:")[0]
    res = parse_log("surefire", console)
    assert res.statuses == {"mix.MixTest.errors": "error", "mix.MixTest.fails": "failed"}
    assert res.summary_seen and res.counts is None


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_parsers_survive_garbage(runner):
    for text in ("", "\x00\xff garbage \x1b[31m", "ok\n" * 1000, "<testsuite><testcase"):
        res = parse_log(runner, text)
        assert res.statuses == {} or runner == "tap"


# -- fake-pass guards --------------------------------------------------------------------------
def _pytest(rc: int, body: str, summary: str = "=== 1 passed in 0.01s ===") -> tuple[RunLog, object]:
    log = body + "\n" + summary + "\n"
    return RunLog(log, rc, False), parse_log("pytest", log)


def test_guard_zero_tests_is_a_failure():
    run, res = _pytest(5, "collected 0 items", "=== no tests ran in 0.01s ===")
    assert "no test parsed" in check_run(run, res)


def test_guard_missing_summary_means_the_suite_did_not_finish():
    run, res = _pytest(0, "tests/t.py::test_a PASSED", summary="")
    assert "summary line is missing" in check_run(run, res)


def test_guard_exit_codes_are_cross_checked():
    run, res = _pytest(0, "tests/t.py::test_a FAILED", "=== 1 failed in 0.01s ===")
    assert "exit code 0 but 1 failing" in check_run(run, res)
    run, res = _pytest(2, "tests/t.py::test_a PASSED")
    assert "exit code 2 but no failing test" in check_run(run, res)


def test_guard_summary_totals_must_match_the_parse():
    run, res = _pytest(0, "tests/t.py::test_a PASSED", "=== 3 passed in 0.01s ===")
    assert "disagrees with the runner's summary" in check_run(run, res)


def test_guard_timeout():
    run, res = _pytest(0, "tests/t.py::test_a PASSED")
    assert "time limit" in check_run(RunLog(run.log, 124, True), res)


# -- F2P / P2P ---------------------------------------------------------------------------------
def test_classify_like_swe_bench():
    before = {"a": "passed", "b": "failed", "c": "error", "d": "skipped", "e": "passed", "g": "passed"}
    after = {"a": "passed", "b": "passed", "c": "passed", "d": "passed", "e": "failed", "f": "passed", "g": "skipped"}
    res = classify([before, before], [after, after])
    # fail/error/skipped/missing before -> pass after is F2P; a skipped-after test is no pass
    assert res.f2p == ["b", "c", "d", "f"]
    assert res.p2p == ["a"]
    assert res.flaky == []


def test_classify_excludes_flaky_tests():
    b1, b2 = {"a": "passed", "x": "failed"}, {"a": "passed", "x": "failed"}
    a1, a2 = {"a": "passed", "x": "passed", "y": "passed"}, {"a": "failed", "x": "passed", "y": "passed"}
    res = classify([b1, b2], [a1, a2])
    assert res.flaky == ["a"] and res.f2p == ["x", "y"] and res.p2p == []


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_parse_prints_statuses_as_json():
    proc = run_cli("parse", "--runner", "cargo", str(FIX / "cargo.log"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((FIX / "cargo.json").read_text())["expected"]
    proc = run_cli("parse", "--runner", "nope", str(FIX / "cargo.log"), timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown runner")


def test_cli_help():
    for cmd in ([], ["validate"], ["parse"], ["setup-docker"], ["make-parser"], ["cleanup"]):
        proc = run_cli(*cmd, "--help", timeout=60)
        assert proc.returncode == 0 and "Usage" in proc.stdout


def test_validate_without_a_daemon_says_how_to_start_it(tmp_path):
    from samples.swe_envs.lang_repos import PY, make_repo
    from tests.swe_envs.envs.conftest import write_jsonl

    inst = make_repo(tmp_path / "repos", PY)
    proc = run_cli("validate", "--instances", str(write_jsonl(tmp_path / "i.jsonl", [inst])), "--repos",
                   str(tmp_path / "repos"), "--output", str(tmp_path / "out"), timeout=60,
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker daemon is not reachable" in lines[0] and "dockerd" in lines[0]


def test_pytest_swebench_ids_follow_the_harness():
    """SWE-bench's parser: the token after the status word (cut at whitespace), XFAIL no pass, XPASS ignored."""
    log = (FIX / "pytest.log").read_text()
    extra = "PASSED testing/t.py::test_x[a b]\nXFAIL testing/t.py::test_y - reason\nXPASS testing/t.py::test_z\n"
    res = parse_log("pytest-swebench", extra + log)
    assert res.statuses["testing/t.py::test_x[a"] == "passed" and res.statuses["testing/t.py::test_y"] == "skipped"
    assert "testing/t.py::test_z" not in res.statuses
    assert res.statuses["tests/test_mix.py::test_fail"] == "failed" and res.statuses["[1]"] == "skipped"
    # the guards look at the full parse of the same log: summary, totals, exit code
    assert res.guard is not None and check_run(RunLog(log, 1, False), parse_log("pytest-swebench", log)) is None
    cut = "\n".join(log.splitlines()[:30])
    assert "summary line is missing" in check_run(RunLog(cut, 1, False), parse_log("pytest-swebench", cut))
    assert parse_log("auto", log).runner == "pytest"  # an id convention, never picked by auto


def test_captured_pytest_reports_are_not_outer_tests():
    """A real pytester log: inner runs' PASSED/FAILED lines sit in captured output."""
    log = (FIX / "real" / "pytest-pytester.log").read_text()
    full = parse_log("pytest", log)
    assert full.tally() == {"passed": 15, "failed": 1, "skipped": 0, "error": 0} == {**full.counts}
    assert all(t.startswith("testing/logging/test_fixture.py::") for t in full.statuses)
    assert check_run(RunLog(log, 1, False), full) is None
    # SWE-bench's ids keep the inner lines, as its gold PASS_TO_PASS lists do
    swe = parse_log("pytest-swebench", log)
    assert swe.statuses["test_change_level_undo.py::test1"] == "failed" and set(full.statuses) < set(swe.statuses)
