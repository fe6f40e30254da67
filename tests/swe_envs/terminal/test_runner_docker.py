"""The runner on a real Docker engine: oracle/nop/llm agents, rewards, compose, substitution, check.

One tiny image FROM the offline Debian base is shared (content-hash tags: built once).
The LLM agent talks to the scripted HTTP server on 127.0.0.1 (a real server; SmolLM2 cannot be
made to issue a known command sequence).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swe_envs.terminal.config import TerminalConfig
from swe_envs.terminal.task import load_task
from tests.support.scripted_server import Reply, ScriptedServer
from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ctx():
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.terminal.trial import Context

    ensure_docker(BASE)
    # one cheap substitute rule (no packages, shims only) stands in for the default map
    cfg = TerminalConfig.model_validate({"images": {"substitutes": [
        {"match": ["tiny-upstream:*"], "suite": "bookworm", "apt_packages": [], "provision": ["shims"]}]}})
    return Context(cfg, log=lambda m: None)


def _trial(ctx, task_dir, agent, out, cfg=None):
    from swe_envs.terminal.trial import TrialSpec, run_trial

    if cfg is not None:
        ctx.cfg = cfg
    return run_trial(ctx, TrialSpec(load_task(task_dir), agent, f"t__{agent}"), out)


def test_oracle_nop_and_job_layout(ctx, tmp_path):
    task = tiny_task(tmp_path)
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "run", "--task", str(task), "--agent", "oracle",
                        "--output", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    trial = tmp_path / "out" / "tiny__answer__oracle"
    res = json.loads((trial / "result.json").read_text())
    assert res["reward"] == 1.0 and res["error"] is None and res["built"]
    assert (trial / "verifier" / "reward.txt").read_text().strip() == "1"
    assert "PASS" in (trial / "verifier" / "test-stdout.txt").read_text()
    traj = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert [m["role"] for m in traj] == ["user", "assistant", "tool"]
    assert traj[1]["tool_calls"][0]["function"]["name"] == "bash"
    assert json.loads((tmp_path / "out" / "result.json").read_text())["mean_reward"] == 1.0
    nop = _trial(ctx, task, "nop", tmp_path / "o2")
    assert nop["reward"] == 0.0 and nop["error"] is None


def test_missing_or_bad_reward_is_an_error_not_zero(ctx, tmp_path):
    silent = tiny_task(tmp_path, "silent", test_sh="#!/bin/bash\necho ran\n")
    r = _trial(ctx, silent, "oracle", tmp_path / "o")
    assert r["reward"] is None and "wrote no /logs/verifier/reward.txt" in r["error"]
    empty = tiny_task(tmp_path, "empty", test_sh="#!/bin/bash\nmkdir -p /logs/verifier; : > /logs/verifier/reward.txt\n")
    assert "reward.txt is empty" in _trial(ctx, empty, "oracle", tmp_path / "o")["error"]
    js = tiny_task(tmp_path, "json", test_sh="#!/bin/bash\nmkdir -p /logs/verifier\n"
                   "echo '{\"reward\": 0.5, \"lint\": 1}' > /logs/verifier/reward.json\n")
    r = _trial(ctx, js, "oracle", tmp_path / "o")
    assert r["reward"] == 0.5 and r["rewards"] == {"reward": 0.5, "lint": 1.0}


def test_tests_are_uploaded_not_baked_and_offline(ctx, tmp_path):
    # the image cannot see /tests at build time; the container has no network
    task = tiny_task(tmp_path, "net", solve_sh="#!/bin/bash\necho 42 > /app/answer.txt\n"
                     "cat /proc/net/route | wc -l > /logs/agent/routes\n",
                     test_sh="#!/bin/bash\nmkdir -p /logs/verifier\n"
                     "[ \"$(cat /logs/agent/routes)\" = 1 ] && [ -f /tests/expected.txt ] && echo 1 > /logs/verifier/reward.txt"
                     " || echo 0 > /logs/verifier/reward.txt\n")
    assert _trial(ctx, task, "oracle", tmp_path / "o")["reward"] == 1.0  # only the header line: no routes


def test_multi_service_compose_and_steps(ctx, tmp_path):
    compose = ("services:\n  main:\n    build: {context: .}\n  db:\n    build: {context: .}\n"
               "    command: [sh, -c, 'echo ready > /tmp/up; sleep infinity']\n    environment: {ROLE: db}\n")
    test_sh = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
               "getent hosts db >/dev/null && [ \"$(cat /app/answer.txt)\" = 42 ] && echo 1 > /logs/verifier/reward.txt"
               " || echo 0 > /logs/verifier/reward.txt\n")
    task = tiny_task(tmp_path, "compose", test_sh=test_sh, extra={"environment/docker-compose.yaml": compose})
    assert _trial(ctx, task, "oracle", tmp_path / "o")["reward"] == 1.0
    bad = tiny_task(tmp_path, "badcompose", extra={"environment/docker-compose.yaml":
                                                   "services:\n  main:\n    build: .\n    privileged: true\n"})
    assert "services.main.privileged is not supported" in _trial(ctx, bad, "oracle", tmp_path / "o")["error"]
    # two steps in one environment: step 2's test sees step 1's work
    steps = tiny_task(tmp_path, "steps")
    for n, (sol, check) in {"1-write": ("echo 4 > /app/a", "4"), "2-append": ("echo 2 >> /app/a", "4 2")}.items():
        d = steps / "steps" / n
        (d / "tests").mkdir(parents=True)
        (d / "solution").mkdir()
        (d / "instruction.md").write_text(f"step {n}\n")
        (d / "solution" / "solve.sh").write_text(sol + "\n")
        (d / "tests" / "test.sh").write_text(f"mkdir -p /logs/verifier; [ \"$(echo $(cat /app/a))\" = '{check}' ] "
                                             "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n")
    r = _trial(ctx, steps, "oracle", tmp_path / "o")
    assert r["reward"] == 1.0 and [s["step"] for s in r["steps"]] == ["1-write", "2-append"]
    assert _trial(ctx, steps, "nop", tmp_path / "o")["rewards"] == {"1-write": 0.0, "2-append": 0.0}


def _tool_reply(cmd: str) -> Reply:
    return Reply(body={"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]}}]})


def test_llm_agent_tool_calls_and_looping(ctx, tmp_path):
    from core.llm import LLMConfig

    srv = ScriptedServer()
    url = srv.start()
    try:
        srv.script.extend([_tool_reply("ls /app; echo 42 > /app/answer.txt"),
                           Reply(body={"choices": [{"message": {"role": "assistant", "content": "Done."}}]})])
        cfg = ctx.cfg.model_copy(update={"agent": TerminalConfig.model_validate(
            {"agent": {"llm": LLMConfig(base_url=url, cache_dir=None).model_dump(), "max_turns": 3}}).agent})
        task = tiny_task(tmp_path)
        r = _trial(ctx, task, "llm", tmp_path / "o", cfg)
        assert r["reward"] == 1.0 and r["agent_error"] is None
        traj = json.loads((tmp_path / "o" / "t__llm" / "agent" / "trajectory.json").read_text())
        assert [m["role"] for m in traj] == ["system", "user", "assistant", "tool", "assistant"]
        assert "[exit code 0]" in traj[3]["content"] and srv.received[0]["tools"][0]["function"]["name"] == "bash"
        srv.responder = lambda body: _tool_reply("echo still working")  # never finishes
        r = _trial(ctx, task, "llm", tmp_path / "o", cfg)
        assert r["reward"] == 0.0 and "max_turns=3" in r["agent_error"]
    finally:
        srv.stop()


def test_substitute_for_an_absent_upstream_image(ctx, tmp_path):
    df = ("FROM tiny-upstream:1\nRUN add-apt-repository ppa:someone/thing && "
          "curl -fsSL https://deb.nodesource.com/setup_20.x | head -3 > /setup-head\nWORKDIR /app\n")
    test_sh = ("#!/bin/bash\nmkdir -p /logs/verifier\ngrep -q 'nodesource setup stand-in' /setup-head && "
               "[ \"$(cat /app/answer.txt)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n")
    task = tiny_task(tmp_path, "subst", dockerfile=df, test_sh=test_sh)
    r = _trial(ctx, task, "oracle", tmp_path / "o")
    assert r["reward"] == 1.0, r["error"]
    assert r["substitutions"][0]["upstream"] == "tiny-upstream:1" and not r["substitutions"][0]["real"]
    unknown = tiny_task(tmp_path, "unknown", dockerfile="FROM nowhere/image:9\n")
    r = _trial(ctx, unknown, "oracle", tmp_path / "o")
    assert not r["built"] and "no substitute rule matches" in r["error"]


def test_check_contract(ctx, tmp_path):
    tasks = tmp_path / "tasks"
    tiny_task(tasks, "good")
    tiny_task(tasks, "trivial", test_sh="#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    tiny_task(tasks, "broken", dockerfile=f"FROM {BASE}\nRUN exit 3\n")
    out = tmp_path / "check"
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(tasks), "--output",
                        str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = {json.loads(x)["task"]: json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()}
    assert all(set(row) == {"task", "built", "oracle_reward", "nop_reward", "ok", "reason", "network", "isolation"}
               for row in rows.values())
    # every row, a failed build's too, says what network the task asked for and what it ran with
    assert all(row["network"]["run"] == "offline" and row["network"]["asked"] == "public" for row in rows.values())
    # and what its containers could do: only the capabilities given back, the image's user
    assert rows["good"]["isolation"]["capabilities"] == ["CHOWN", "FOWNER"]
    assert {k: v for k, v in rows["good"].items() if k not in ("network", "isolation")} == {
        "task": "good", "built": True, "oracle_reward": 1.0, "nop_reward": 0.0, "ok": True, "reason": ""}
    assert not rows["trivial"]["ok"] and "nop reward 1.0" in rows["trivial"]["reason"]
    assert rows["broken"]["built"] is False and rows["broken"]["reason"].startswith("build")


def test_an_environment_that_fails_to_start_leaves_no_container(ctx, tmp_path):
    """A task healthcheck that never passes: the constructor raises, and the container it had started is gone."""
    from swe_envs.terminal.environment import Environment

    root = tiny_task(tmp_path, "unhealthy")
    (root / "task.toml").write_text((root / "task.toml").read_text()
                                    + "\n[environment.healthcheck]\ncommand = \"false\"\nretries = 0\ninterval_sec = 0.1\n")
    task = load_task(root)
    built = ctx.build(task)
    assert built.ok, built.error
    with pytest.raises(RuntimeError, match="healthcheck never passed"):
        Environment(ctx.client, task, built, ctx.cfg.runner)
    assert ctx.client.containers.list(all=True, filters={"ancestor": built.images["main"]}) == []
