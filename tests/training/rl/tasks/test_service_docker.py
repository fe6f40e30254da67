"""The session task services as processes on a real Docker engine: an episode over HTTP (``/task``,
``/step`` with the episode's tool calls, ``/reward`` from the session's verifier, ``/close``) on the tiny
Harbor task, and the gold tool sequence on a real SWE-bench Verified instance."""

from __future__ import annotations

import json
import time

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task
from tests.training.conftest import start_module, stop
from training.serving.http_json import CallFailure, call

pytestmark = pytest.mark.docker


def _call(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _service(kind: str, args: dict, tmp_path):
    proc, url = start_module(["training.rl", "task-service", "--kind", kind, "--name", kind,
                              "--args", json.dumps(args)], tmp_path / "port")
    while isinstance(call(f"{url}/health", None), CallFailure):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    return proc, url


def _episode(url: str, inst: dict, episode: str, calls: list[dict], timeout_s: float = 300) -> dict:
    """The calls one turn each, as the orchestrator sends them; the reward at the end."""
    msgs = list(inst["messages"])
    for reply in calls:
        msgs.append(reply)
        res = call(f"{url}/step", {"instance": inst, "turns": [[0]], "messages": msgs, "episode": episode},
                   timeout_s=timeout_s)
        assert not isinstance(res, CallFailure), res
        if res["observation"] is None:
            break
        msgs += res["observation"]
    got = call(f"{url}/reward", {"instance": inst, "messages": msgs, "episode": episode}, timeout_s=timeout_s)
    assert not isinstance(got, CallFailure), got
    return got


def test_terminal_service_runs_an_episode_over_http(tmp_path):
    from swe_envs.docker_setup import ensure_docker

    ensure_docker(BASE)
    tiny_task(tmp_path / "tasks")
    proc, url = _service("terminal", {"tasks": str(tmp_path / "tasks"), "out": str(tmp_path / "out")}, tmp_path)
    try:
        inst = call(f"{url}/task", {"seed": 0})["instance"]
        assert inst["session"] and "42" in inst["messages"][0]["content"]
        good = _episode(url, inst, "a.0", [_call("bash", command="echo 42 > /app/answer.txt"), _call("submit")])
        assert good["reward"] == 1.0 and good["info"]["ended"] == "submit"
        assert _episode(url, inst, "b.0", [_call("bash", command="echo 41 > /app/answer.txt"),
                                           _call("submit")])["reward"] == 0.0
        # an episode given up half-way: closed at once; stepping it again is 410 (start over)
        msgs = inst["messages"] + [_call("bash", command="true")]
        call(f"{url}/step", {"instance": inst, "turns": [[0]], "messages": msgs, "episode": "c.0"}, timeout_s=300)
        assert call(f"{url}/close", {"episode": "c.0"}) == {"closed": True}
        lost = call(f"{url}/step", {"instance": inst, "turns": [[0], [0]], "episode": "c.0", "messages": msgs + [
            {"role": "tool", "content": "x"}, _call("submit")]})
        assert isinstance(lost, CallFailure) and lost.kind == "http_410"
    finally:
        stop(proc)


def test_sigkilled_service_leaves_no_container_after_the_reaper(tmp_path):
    """A task service holding open sessions is SIGKILLed (nothing of it runs to close them): its
    containers outlive it, and the next service on the host removes every one (owner label)."""
    import os
    import signal
    import socket

    from swe_envs.docker_setup import docker_client, ensure_docker
    from swe_envs.sandbox import LABEL

    ensure_docker(BASE)
    tiny_task(tmp_path / "tasks")
    args = {"tasks": str(tmp_path / "tasks"), "out": str(tmp_path / "out")}
    proc, url = _service("terminal", args, tmp_path)
    owner = f"{socket.gethostname()}:{proc.pid}"
    client = docker_client()

    def owned() -> int:
        return len(client.containers.list(all=True, filters={"label": f"{LABEL}={owner}"}))

    try:
        inst = call(f"{url}/task", {"seed": 0})["instance"]
        for ep in ("k.0", "k.1"):
            res = call(f"{url}/step", {"instance": inst, "turns": [[0]], "episode": ep, "messages": inst["messages"] + [
                _call("bash", command="echo busy")]}, timeout_s=300)
            assert not isinstance(res, CallFailure), res
        assert owned() == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert owned() == 2  # leaked: nothing closed them
    finally:
        stop(proc)
    (tmp_path / "port").unlink()
    nxt, _ = _service("terminal", args, tmp_path)  # its backend sweeps before it serves
    try:
        assert owned() == 0
    finally:
        stop(nxt)


@pytest.mark.slow
def test_swe_service_gold_tool_sequence_resolves_a_real_instance(tmp_path):
    """A real SWE-bench Verified instance (pallets/flask-5014, SWE-bench's own JSONL and the git bundle
    in ../shared/swe-real): the gold patch written with the editor and applied through bash in the
    session is resolved by the session's verify (reward 1); submitting at once scores 0. The first
    run builds the instance's environment (minutes)."""
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
    proc, url = _service("swe", {"instances": str(one), "repos": str(data), "out": str(tmp_path / "out")}, tmp_path)
    try:
        task = call(f"{url}/task", {"seed": 3})["instance"]
        assert task["id"] == "pallets__flask-5014" and "/testbed" in task["messages"][0]["content"]
        gold = _episode(url, task, "gold.0", [
            _call("str_replace_editor", command="create", path="/tmp/gold.diff", file_text=inst["patch"]),
            _call("bash", command="git apply --whitespace=nowarn /tmp/gold.diff && git status --short"),
            _call("submit")], timeout_s=2400)
        assert gold["reward"] == 1.0 and gold["info"]["steps"][0]["status"] == "resolved", gold
        nop = _episode(url, task, "nop.0", [_call("submit")], timeout_s=2400)
        assert nop["reward"] == 0.0 and nop["info"]["steps"][0]["status"] == "empty_patch", nop
    finally:
        stop(proc)
