"""The sandbox: no network, limits, non-root, read-only task dir only; always removed, even on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from samples.swe_envs.lang_repos import make_repo
from swe_envs.config import SandboxConfig, SweEnvsConfig
from swe_envs.images import Images
from swe_envs.sandbox import LABEL, Sandbox, owner
from tests.swe_envs.envs.bad_repos import HANG
from tests.swe_envs.envs.conftest import ROOT, write_jsonl

pytestmark = pytest.mark.docker

PROBE = r"""
id -u
python3 - <<'EOF'
import json, os, socket
out = {"ifaces": sorted(os.listdir("/sys/class/net"))}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    out["connect"] = "ok"
except OSError as e:
    out["connect"] = type(e).__name__
try:
    open("/task/x", "w")
    out["task_write"] = "ok"
except OSError as e:
    out["task_write"] = type(e).__name__
def first(*paths):
    for p in paths:
        if os.path.exists(p):
            return open(p).read().strip()
out["mem"] = first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
out["pids"] = first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")
out["mounts"] = [l.split()[1] for l in open("/proc/self/mounts") if l.split()[1].startswith(("/task", "/testbed", "/home"))]
print(json.dumps(out))
EOF
"""


@pytest.fixture(scope="module")
def python_toolchain(docker_ready):
    cfg = SweEnvsConfig()
    res = Images(docker_ready, cfg.build).toolchain("python", cfg.toolchain("python"))
    assert res.ok, res.log[-2000:]
    return res.tag


def test_container_limits(docker_ready, python_toolchain):
    sb = Sandbox(docker_ready, SandboxConfig(memory_mb=300, pids=64, cpus=1))
    res = sb.run(python_toolchain, PROBE, [("note", "")], runs=1, timeout_s=60)
    assert res.runs and res.runs[0].rc == 0, res
    uid, info = res.runs[0].log.strip().splitlines()
    info = json.loads(info)
    assert uid == "10001"  # the non-root user of the toolchain image
    assert info["ifaces"] == ["lo"] and info["connect"] != "ok"  # no network at test time
    assert info["task_write"] != "ok"  # the only host mount is read-only
    assert info["mounts"] == ["/task"]
    assert int(info["mem"]) == 300 * 2**20 and info["pids"] == "64"
    assert sb.live == set()


def test_timeout_kills_and_container_is_removed(docker_ready, python_toolchain):
    sb = Sandbox(docker_ready, SandboxConfig())
    t0 = time.monotonic()
    res = sb.run(python_toolchain, "sleep 600", [], runs=1, timeout_s=3)
    assert time.monotonic() - t0 < 60
    assert res.runs[0].timed_out and res.runs[0].rc == 124
    # this process's containers only: other runs on a shared engine carry the same label
    assert docker_ready.containers.list(all=True, filters={"label": f"{LABEL}={owner()}"}) == []


def test_sigterm_mid_run_removes_container(docker_ready, tmp_path):
    """The batch is interrupted while a test hangs: the container still goes away."""
    inst = make_repo(tmp_path / "repos", HANG, "interrupted")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("sandbox: {test_timeout_s: 300}\n")
    proc = subprocess.Popen([sys.executable, "-m", "swe_envs", "validate", "--instances",
                             str(write_jsonl(tmp_path / "in.jsonl", [inst])), "--repos", str(tmp_path / "repos"),
                             "--output", str(tmp_path / "out"), "--config", str(cfg)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    owner_filter = {"label": f"{LABEL}={os.uname().nodename}:{proc.pid}"}
    try:
        deadline = time.monotonic() + 240
        while not docker_ready.containers.list(filters=owner_filter | {"status": "running"}):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no test container started"
            time.sleep(0.5)
        time.sleep(2)  # inside the hanging test now
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert docker_ready.containers.list(all=True, filters=owner_filter) == []
