"""Real Harbor-native tasks (fixtures/harbor_native, written from Harbor's docs and its ``tasks init``
template, not by our converter) checked offline through the unchanged CLI, and loaded by the
``harbor`` package's own task model.

The fixtures cover Harbor's standard verifier (curl-installed uv + ``uvx --with pytest
--with pytest-json-ctrf``), the earlier ``uv init && uv add`` verifier, a ``pip install -r``
verifier, a multi-step task, two compose tasks (``main`` without build/image; no ``main`` at all),
a legacy ``allow_internet = true`` task, a prebuilt ``docker_image`` task, a bash verifier
writing ``reward.json``, and Harbor's separate verifier (the ``tasks init`` default: ``tests/Dockerfile``;
a step in a copy of the task's environment with artifacts and a collect hook). Each has a real ``solution/solve.sh``: the oracle must score 1, doing
nothing 0, with every container offline (the runner's default).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures" / "harbor_native"


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    from swe_envs.docker_setup import ensure_docker

    ensure_docker("local/debian:bookworm")
    out = tmp_path_factory.mktemp("harbor-native")
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(FIXTURES),
                        "--output", str(out)], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {json.loads(line)["task"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}
    return out, rows


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_every_fixture_passes_its_oracle_and_fails_nop_offline(checked):
    out, rows = checked
    assert sorted(rows) == sorted(p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
    bad = {t: r["reason"] for t, r in rows.items() if not (r["oracle_reward"] == 1.0 and r["nop_reward"] == 0.0)}
    assert not bad, bad
    # every row says what network the task asked for and what it got
    assert all(r["network"]["run"] == "offline" for r in rows.values())
    legacy = rows["wordfreq-allow-internet"]["network"]
    assert legacy["asked"] == "public" and legacy["declared_by"] == "allow_internet"


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_the_standard_verifier_was_served_not_skipped(checked):
    out, rows = checked
    details = {json.loads(x)["task"]: json.loads(x) for x in (out / "details.jsonl").read_text().splitlines()}
    subs = " | ".join(s["local"] or "" for s in details["hello-world"]["substitutions"])
    assert "the image's provisioned uv" in subs and "wheels for Python 3.11" in subs
    log = (out / "trials" / "hello-world__oracle" / "verifier" / "test-stdout.txt").read_text()
    assert "provisioned offline" in log and "2 passed" in log and "pytest-json-ctrf" not in log.split("passed")[-1]
    nop = (out / "trials" / "hello-world__nop" / "verifier" / "test-stdout.txt").read_text()
    assert "2 failed" in nop  # nop scored 0 because the tests ran and failed, not because they could not run
    # the reward.json verifier's fields are kept
    rj = json.loads((out / "trials" / "backup-reward-json__oracle" / "result.json").read_text())
    assert rj["rewards"] == {"reward": 1.0, "archive": 1.0, "files": 1.0, "checksum": 1.0}
    steps = json.loads((out / "trials" / "access-log-steps__oracle" / "result.json").read_text())
    assert [s["step"] for s in steps["steps"]] == ["extract", "report"]


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_separate_verifiers_ran_apart_from_the_agent(checked):
    """harbor 0.26's default template: the tests image built from tests/ (astral's uv image served by a
    substitute), the report crossing as an artifact; a step graded in a copy of the task's environment."""
    out, rows = checked
    wc = json.loads((out / "trials" / "wc-report-separate__oracle" / "result.json").read_text())
    how = wc["steps"][0]["verifier"]
    assert how["mode"] == "separate" and how["bundled_tests"] and "wc-report-separate-verifier" in how["images"]["main"]
    assert any(s["upstream"] == "ghcr.io/astral-sh/uv:0.9.7" and s["local"] for s in how["substitutions"])
    log = (out / "trials" / "wc-report-separate__oracle" / "verifier" / "test-stdout.txt").read_text()
    assert "2 passed" in log  # including: the agent's input file is not in the verifier
    notes = json.loads((out / "trials" / "notes-archive-steps__oracle" / "result.json").read_text())
    assert [s["verifier"]["mode"] for s in notes["steps"]] == ["shared", "separate"]
    assert notes["steps"][1]["rewards"] == {"reward": 1.0, "archive": 1.0, "artifacts": 1.0, "collected": 1.0}


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_harbors_own_task_model_loads_the_fixtures_and_converted_seeds(tmp_path, tb_seeds):
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.convert import convert_task
    from swe_envs.terminal.discover import find_tasks
    from swe_envs.terminal.harbor_model import harbor_load
    from swe_envs.terminal.trial import Context

    seeds = find_tasks(tb_seeds)
    picked = [seeds[0], seeds[len(seeds) // 2], seeds[-1]]  # an EvoEval and two Aider-polyglot tasks
    converted = [convert_task(p, tmp_path / f"seed{i}") for i, p in enumerate(picked)]
    tasks = sorted(p for p in FIXTURES.iterdir() if (p / "task.toml").is_file()) + [Path(c) for c in converted]
    bad = tmp_path / "bad"  # Harbor refuses this one: its [task] name is not org/name
    shutil.copytree(FIXTURES / "hello-world", bad)
    (bad / "task.toml").write_text((bad / "task.toml").read_text().replace("glm5-fixtures/hello-world", "no-org"))
    ctx = Context(TerminalConfig(), log=lambda m: None)
    rows = harbor_load(tasks + [bad], ctx.images, ctx.subst)
    refused = {r["task"]: r["error"] for r in rows if not r["ok"]}
    assert list(refused) == [str(bad)] and "org/name" in refused[str(bad)]
    by = {Path(r["task"]).name: r for r in rows}
    assert by["access-log-steps"]["steps"] == ["extract", "report"]
    assert by["wordfreq-allow-internet"]["network_mode"] == "public"  # legacy allow_internet, normalised
    assert by["roman-prebuilt-image"]["docker_image"] == "python:3.13-slim"


STD_TEST = (FIXTURES / "hello-world" / "tests" / "test.sh").read_text()


def test_bare_image_gets_python_pinned_uv_and_the_curl_shim(tmp_path):
    """An image with no python3, no uv and no curl (the Debian base itself): the standard verifier
    still runs offline, on Debian's python3 and uv 0.9.7 from its PyPI wheel."""
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.task import load_task
    from swe_envs.terminal.trial import Context, TrialSpec, run_trial
    from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

    test_py = "from pathlib import Path\n\ndef test_answer():\n    assert Path('/app/answer.txt').read_text().strip() == '42'\n"
    task = tiny_task(tmp_path, "bare", test_sh=STD_TEST, extra={"tests/test_outputs.py": test_py,
                                                                "environment/Dockerfile": f"FROM {BASE}\nWORKDIR /app\n"})
    ctx = Context(TerminalConfig(), log=lambda m: None)
    oracle = run_trial(ctx, TrialSpec(load_task(task), "oracle", "bare__oracle"), tmp_path / "o")
    assert oracle["reward"] == 1.0, oracle["error"]
    local = " | ".join(s["local"] or "" for s in oracle["substitutions"])
    assert "Debian's python3 3.11" in local and "uv 0.9.7 from its PyPI wheel" in local
    log = (tmp_path / "o" / "bare__oracle" / "verifier" / "test-stdout.txt").read_text()
    assert "uv 0.9.7 provisioned offline (PyPI wheel)" in log and "1 passed" in log
    nop = run_trial(ctx, TrialSpec(load_task(task), "nop", "bare__nop"), tmp_path / "o")
    assert nop["reward"] == 0.0 and "1 failed" in (tmp_path / "o" / "bare__nop" / "verifier" / "test-stdout.txt").read_text()
