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
