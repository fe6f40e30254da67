"""The terminal task service on a real Docker engine: a reply's shell script runs as the Harbor
task's solution and the verifier's reward comes back (a tiny task FROM the offline Debian base)."""

from __future__ import annotations

import json

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task
from tests.training.conftest import start_module, stop
from training.serving.http_json import CallFailure, call

pytestmark = pytest.mark.docker


def test_terminal_service_rewards_the_replys_script(tmp_path):
    import time

    from swe_envs.docker_setup import ensure_docker

    ensure_docker(BASE)
    tiny_task(tmp_path / "tasks")
    proc, url = start_module(["training.rl", "task-service", "--kind", "terminal", "--name", "term",
                              "--args", json.dumps({"tasks": str(tmp_path / "tasks"), "timeout_s": 300})],
                             tmp_path / "port")
    try:
        while isinstance(call(f"{url}/health", None), CallFailure):
            time.sleep(0.05)
        inst = call(f"{url}/task", {"seed": 0})["instance"]
        assert "42" in inst["messages"][0]["content"] and "```bash" in inst["messages"][0]["content"]

        def reward(text: str):
            return call(f"{url}/reward", {"instance": inst, "messages": inst["messages"] + [
                {"role": "assistant", "content": text}]}, timeout_s=300)

        assert reward("Here:\n```bash\necho 42 > /app/answer.txt\n```")["reward"] == 1.0
        assert reward("```bash\necho 41 > /app/answer.txt\n```")["reward"] == 0.0
        # a bash tool call is the script too
        tool = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"command": "echo 42 > /app/answer.txt"})}}]}
        got = call(f"{url}/reward", {"instance": inst, "messages": inst["messages"] + [tool]}, timeout_s=300)
        assert got["reward"] == 1.0
    finally:
        stop(proc)


def test_swe_service_reward_is_resolved_from_the_evaluation_harness(tmp_path):
    """A real SWE-bench Verified instance (pallets/flask-5014, SWE-bench's own JSONL and the git
    bundle in ../shared/swe-real): the gold patch inside a reply's ```diff block is `resolved`
    (reward 1), a patch that changes nothing the tests see is unresolved (reward 0)."""
    import time
    from pathlib import Path

    data = Path(__file__).resolve().parents[5] / "shared" / "swe-real"
    src = data / "swebench_verified_pytest_flask.jsonl"
    if not src.is_file():
        pytest.skip(f"no real SWE-bench instances at {data}")
    from swe_envs.docker_setup import ensure_docker

    ensure_docker(BASE)
    inst = next(r for r in map(json.loads, src.read_text().splitlines()) if r["instance_id"] == "pallets__flask-5014")
    one = tmp_path / "instances.jsonl"
    one.write_text(json.dumps(inst) + "\n")
    proc, url = start_module(["training.rl", "task-service", "--kind", "swe", "--name", "swe", "--args",
                              json.dumps({"instances": str(one), "repos": str(data), "timeout_s": 1200})],
                             tmp_path / "port")
    try:
        while isinstance(call(f"{url}/health", None), CallFailure):
            time.sleep(0.05)
        task = call(f"{url}/task", {"seed": 3})["instance"]
        assert task["id"] == "pallets__flask-5014" and "pallets/flask" in task["messages"][0]["content"]

        def reward(text: str):
            return call(f"{url}/reward", {"instance": task, "messages": task["messages"] + [
                {"role": "assistant", "content": text}]}, timeout_s=1500)

        gold = reward(f"The fix:\n```diff\n{inst['patch']}```\nDone.")
        assert gold["reward"] == 1.0 and gold["info"]["outcome"] == "resolved", gold
        noop = "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+note\n"
        miss = reward(f"```diff\n{noop}```")
        assert miss["reward"] == 0.0 and miss["info"]["outcome"] == "unresolved", miss
    finally:
        stop(proc)
