"""Environment sessions on a real Docker engine: the tools inside a container, gold/nop/scripted episodes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swe_envs.sessions.run import run
from swe_envs.sessions.tools import run_tool
from tests.swe_envs.terminal.tiny_tasks import tiny_task

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.sessions.session import TerminalSession
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.trial import Context

    ensure_docker()
    root = tmp_path_factory.mktemp("sess")
    s = TerminalSession(Context(TerminalConfig(), log=lambda m: None), tiny_task(root), root / "verifier")
    yield s
    s.close()


def test_editor_and_bash_run_inside_the_container(session, tmp_path):
    marker = tmp_path / "host-file.txt"  # a host path: the container must not see or create it
    obs = run_tool(session, "str_replace_editor", {"command": "create", "path": "/app/a.py",
                                                   "file_text": "x = 1\ny = 2\n"})
    assert not obs.error
    assert "     1\tx = 1" in run_tool(session, "str_replace_editor", {"command": "view", "path": "/app/a.py"}).text
    assert not run_tool(session, "str_replace_editor", {"command": "str_replace", "path": "/app/a.py",
                                                        "old_str": "y = 2", "new_str": "y = 3"}).error
    twice = run_tool(session, "str_replace_editor", {"command": "str_replace", "path": "/app/a.py", "old_str": "=",
                                                     "new_str": ":"})
    assert twice.error and "occurs 2 times" in twice.text
    assert not run_tool(session, "str_replace_editor", {"command": "insert", "path": "/app/a.py", "insert_line": 1,
                                                        "new_str": "z = 9"}).error
    out = run_tool(session, "bash", {"command": f"cat /app/a.py; touch {marker}; hostname"})
    assert "x = 1\nz = 9\ny = 3\n" in out.text and "[exit code 0]" in out.text and not marker.exists()
    assert "[exit code 3]" in run_tool(session, "bash", json.dumps({"command": "exit 3"})).text
    assert "timed out" in run_tool(session, "bash", {"command": "sleep 30", "timeout": 1}).text
    assert run_tool(session, "bash", "{not json").error and run_tool(session, "rm_rf", {}).error
    assert run_tool(session, "str_replace_editor", {"command": "view", "path": "relative.py"}).error
    assert run_tool(session, "submit", {}).done


def test_gold_scores_one_nop_zero_and_a_scripted_policy_replays(tmp_path):
    tasks = tmp_path / "tasks"
    tiny_task(tasks)
    gold = run("gold", tmp_path / "gold", tasks=tasks, log=lambda m: None)
    nop = run("nop", tmp_path / "nop", tasks=tasks, log=lambda m: None)
    assert [r["reward"] for r in gold] == [1.0] and [r["reward"] for r in nop] == [0.0]
    roles = [m["role"] for m in gold[0]["messages"]]
    assert roles[0] == "user" and roles.count("tool") == gold[0]["turns"]
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"id": "tiny/answer", "tool_calls": [
        {"name": "bash", "arguments": {"command": "echo 42 > /app/answer.txt"}}]}) + "\n")
    scripted = run(f"scripted:{script}", tmp_path / "scripted", tasks=tasks, log=lambda m: None)
    assert scripted[0]["reward"] == 1.0 and scripted[0]["turns"] == 2  # its call, then submit
    rows = [json.loads(line) for line in (tmp_path / "scripted" / "trajectories.jsonl").read_text().splitlines()]
    assert {"id", "messages", "reward", "turns"} <= set(rows[0])


def test_session_run_cli_and_its_errors(tmp_path):
    tasks = tmp_path / "tasks"
    tiny_task(tasks)
    r = subprocess.run([sys.executable, "-m", "swe_envs", "session", "run", "--policy", "gold", "--tasks", str(tasks),
                        "--output", str(tmp_path / "o")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "mean reward 1.000" in r.stdout, r.stderr
    bad = subprocess.run([sys.executable, "-m", "swe_envs", "session", "run", "--policy", "magic", "--tasks",
                          str(tasks), "--output", str(tmp_path / "o2")], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "--policy" in bad.stderr


def _call(base: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(base + path, method=method, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_http_service_opens_steps_verifies_bounds_and_reaps(tmp_path):
    import threading

    from swe_envs.sessions.pool import SessionPool
    from swe_envs.sessions.run import openers
    from swe_envs.sessions.service import make_server

    tasks = tmp_path / "tasks"
    tiny_task(tasks)
    opens, _ = openers(None, None, tasks, tmp_path / "out", None)
    pool = SessionPool(opens, max_sessions=1, idle_timeout_s=600)
    server = make_server(pool)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        code, opened = _call(base, "POST", "/sessions", {"id": "tiny/answer"})
        assert code == 200 and "42" in opened["instruction"] and {t["function"]["name"] for t in opened["tools"]} == {
            "bash", "str_replace_editor", "submit"}
        sid = opened["session_id"]
        assert _call(base, "POST", "/sessions", {"id": "tiny/answer"})[0] == 429  # max_sessions=1
        assert _call(base, "POST", "/sessions", {"id": "nope"})[0] == 404
        code, step = _call(base, "POST", f"/sessions/{sid}/step", {"name": "bash",
                                                                   "arguments": {"command": "echo 42 > /app/answer.txt"}})
        assert code == 200 and "[exit code 0]" in step["observation"]
        code, verdict = _call(base, "POST", f"/sessions/{sid}/verify")
        assert code == 200 and verdict["reward"] == 1.0
        assert _call(base, "GET", "/sessions")[1]["open"][0]["turns"] == 1
        assert _call(base, "DELETE", f"/sessions/{sid}") == (200, {"closed": True})
        # the reaper: a session idle past its limit is closed and its container removed
        code, opened = _call(base, "POST", "/sessions", {"id": "tiny/answer"})
        container = pool.get(opened["session_id"]).container()
        assert pool.reap(now=time.monotonic() + 3600) == 1 and pool.sessions == {}
        import docker.errors

        with pytest.raises(docker.errors.NotFound):
            container.reload()
    finally:
        server.shutdown()
        pool.shutdown()
