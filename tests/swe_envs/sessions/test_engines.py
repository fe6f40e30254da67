"""Sessions fanned out over two Docker engine URLs on a real engine.

The second URL is a test double for a second host: a unix socket of our own whose connections are
forwarded byte for byte to this machine's engine, so the two URLs reach one dockerd. What is tested is
the placement (least loaded, per-engine bounds), that each session's container and builds go through
its own engine's client, and the sweep over every engine after a SIGKILL; not two daemons' isolation."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def second_url(tmp_path):
    """unix://<tmp>/engine2.sock, forwarded to the local engine's socket."""
    target = (os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock").removeprefix("unix://")
    if not Path(target).exists():
        pytest.skip("the local engine is not on a unix socket")
    path = tmp_path / "engine2.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(64)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX)
            up.connect(target)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"unix://{target}", f"unix://{path}"
    server.close()


def test_sessions_spread_over_two_engines_within_their_bounds(second_url, tmp_path):
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.sandbox import LABEL, owner
    from swe_envs.sessions.hosts import Hosts
    from swe_envs.sessions.pool import SessionPool
    from swe_envs.sessions.run import openers

    ensure_docker(BASE)
    first, second = second_url
    tiny_task(tmp_path / "tasks")
    opens, _ = openers(None, None, tmp_path / "tasks", tmp_path / "out", None)
    hosts = Hosts.from_specs([f"{first}=1", f"{second}=2"], max_sessions=8)
    pool = SessionPool(opens, hosts=hosts, log=lambda m: None)
    try:
        sessions = [pool.open("tiny/answer") for _ in range(3)]
        assert [s.host.url for s in sessions] == [first, second, second]  # 0/1 then 0/2, 1/1 full, 1/2
        with pytest.raises(OverflowError):
            pool.open("tiny/answer")
        for s in sessions:  # each container went through its own engine's client
            assert s.env.client is s.host.client() and s.host.client().containers.get(s.container().id)
        assert [e["open"] for e in pool.describe()["engines"]] == [1, 2]
        s = sessions[1]
        assert "[exit code 0]" in s.step("bash", {"command": "echo 42 > /app/answer.txt"}).text
        assert s.verify()[0] == 1.0
        pool.close(sessions[0].id)
        assert pool.open("tiny/answer").host.url == first  # room again on the first engine
        mine = hosts.hosts[0].client().containers.list(all=True, filters={"label": f"{LABEL}={owner()}"})
        assert len(mine) >= 3
    finally:
        pool.shutdown()
    assert [h.open for h in hosts.hosts] == [0, 0]
