"""Hostile test suites in the SWE sandbox (swe_envs/sandbox.py) on a real Docker engine.

Each "suite" is the test command of a task, run exactly as validation runs it (non-root, no
network, limits, read-only /task) in the offline base image. Each tries one escape; the host
checks from outside that it failed (a listening socket got no connection, a host file's secret
is absent, no file appeared, no container or process survives) and that the run is recorded as
a failure with a reason (exit code, time limit, output limit)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from swe_envs.config import SandboxConfig
from swe_envs.envs.validate.validator import check_run
from swe_envs.sandbox import LABEL, Sandbox, owner
from tests.reliability.ledger import LEDGER

pytestmark = pytest.mark.docker
AREA = "containment: SWE sandbox"
CFG = SandboxConfig(cpus=1, memory_mb=256, pids=64, test_timeout_s=8, container_margin_s=20, max_log_mb=1,
                    max_file_mb=32, disk_mb=128)


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    client, image = docker_engine
    sb = Sandbox(client, CFG)
    yield sb, image, client
    sb.close()
    assert _mine(client) == []  # nothing survives


def run(sandbox, command: str, timeout_s: float = 8):
    sb, image, _ = sandbox
    res = sb.run(image, command, [], runs=1, timeout_s=timeout_s)
    assert not res.error, res.error
    assert sb.live == set()
    return res, res.runs[0]


class Listener:
    """A real TCP listener on every host interface: did anything from the container reach it?"""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port, self.hits, self.stop = self.sock.getsockname()[1], 0, False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.hits += 1
                conn.close()
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.sock.close()


def _host_ips() -> list[str]:
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return [ip for ip in out if ":" not in ip] + ["172.17.0.1"]


def test_network_is_unreachable_when_off(sandbox):
    listener = Listener()
    try:
        targets = " ".join(f"{ip}:{listener.port}" for ip in _host_ips())
        script = f"""for t in {targets} 1.1.1.1:53 10.0.0.1:80; do
  ip=${{t%:*}}; port=${{t#*:}}
  if timeout 3 bash -c "exec 3<>/dev/tcp/$ip/$port" 2>/dev/null; then echo "REACHED $t"; fi
done
echo "IFACES $(ls /sys/class/net | tr '\\n' ' ')"; exit 1"""
        res, r = run(sandbox, script)
    finally:
        listener.close()
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(listener.hits > 0 or "REACHED" in r.log))
    assert listener.hits == 0 and "REACHED" not in r.log, r.log
    assert "IFACES lo \n" in r.log and r.rc == 1, r.log


def test_host_files_are_not_visible(sandbox, tmp_path):
    secret = f"host-secret-{uuid.uuid4().hex}"
    host_file = tmp_path / "secret.txt"
    host_file.write_text(secret)
    # the command names the file, never its content: the content must not come back
    res, r = run(sandbox, f"cat {host_file} /etc/shadow /proc/1/environ 2>&1; "
                          f"find / -name {host_file.name} -xdev 2>/dev/null | head -3; exit 3")
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(secret in r.log))
    assert secret not in r.log and r.rc == 3


def test_a_secret_in_the_hosts_environment_is_not_visible(sandbox, monkeypatch):
    """The host's environment (tokens, credentials) never enters a test container: a secret set in
    this process's environment, as a CI job's token would be, is looked for everywhere it could show."""
    secret = f"host-env-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GLM5_HOSTILE_SECRET", secret)
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    res, r = run(sandbox, "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; "
                          "grep -rsl GLM5_HOSTILE_SECRET /etc /home /tmp /testbed 2>/dev/null; exit 6")
    contained = secret not in r.log and "GLM5_HOSTILE_SECRET" not in r.log
    LEDGER.attempt(AREA, "read a secret set in the host's environment (env, every /proc/*/environ)", contained,
                   f"rc {r.rc}: the container's environment is its own ({len(r.log.splitlines())} lines, no secret)"
                   if contained else "ESCAPED: the secret is in the container")
    assert contained and r.rc == 6, r.log[-1000:]


def test_writes_outside_the_sandbox_fail_and_leave_nothing_on_the_host(sandbox, tmp_path):
    marker = f"pwned-{uuid.uuid4().hex}"
    res, r = run(sandbox, f"""for d in /task /etc /usr/bin /testbed {tmp_path}; do
  if echo x > $d/{marker} 2>/dev/null; then echo "WROTE $d"; fi
done; exit 4""")
    found = subprocess.run(["find", "/tmp", "/var/tmp", str(tmp_path), "-name", marker], capture_output=True,
                           text=True).stdout
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(bool(found.strip())))
    assert not found.strip()
    assert "WROTE /task" not in r.log and "WROTE /etc" not in r.log and "WROTE /usr/bin" not in r.log
    assert r.rc == 4


def test_no_privilege_no_capabilities_no_docker_socket(sandbox):
    res, r = run(sandbox, """id -u
grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status
ls -l /var/run/docker.sock /run/docker.sock 2>&1
mount -t tmpfs none /mnt 2>&1 && echo MOUNTED
chown 0 /tmp 2>&1 && echo CHOWNED
cp /bin/sh /tmp/sh && chmod u+s /tmp/sh && /tmp/sh -p -c 'id -u' 2>&1
exit 5""")
    lines = r.log.splitlines()
    escaped = (lines[0].strip() == "0" or "MOUNTED" in r.log or "CHOWNED" in r.log
               or "CapEff:\t0000000000000000" not in r.log or "srw" in r.log)
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(escaped))
    assert lines[0].strip() == "10001"
    assert "CapEff:\t0000000000000000" in r.log and "NoNewPrivs:\t1" in r.log
    assert "MOUNTED" not in r.log and "CHOWNED" not in r.log and "srw" not in r.log
    assert r.log.strip().splitlines()[-1].strip() != "0"  # the setuid copy still runs as 10001
    assert r.rc == 5


def test_fork_bomb_is_contained(sandbox):
    t0 = time.monotonic()
    res, r = run(sandbox, "bomb() { bomb | bomb & }; bomb; sleep 30", timeout_s=5)
    LEDGER.add(AREA, tried=1, faults=1)
    assert time.monotonic() - t0 < 60
    assert r.timed_out or r.rc != 0
    assert check_run(r, _empty()) is not None
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


def test_printing_gigabytes_is_cut_at_the_log_limit(sandbox):
    res, r = run(sandbox, "yes 'spam spam spam spam spam spam spam spam' ; echo DONE", timeout_s=8)
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(len(r.log) > 2**20 + 16))
    assert r.output_limited and len(r.log.encode()) <= 2**20
    assert "test output reached the log limit" in check_run(r, _empty())


def test_filling_the_disk_is_bounded_per_file(sandbox):
    res, r = run(sandbox, "dd if=/dev/zero of=/tmp/fill bs=1M count=512 2>&1; ls -l /tmp/fill; exit 0", timeout_s=8)
    size = next((int(w) for line in r.log.splitlines() if line.endswith("/tmp/fill")
                 for w in line.split()[4:5] if w.isdigit()), None)
    LEDGER.add(AREA, tried=1, faults=1, escapes=int(size is None or size > 32 * 2**20))
    assert size is not None and size <= 32 * 2**20, r.log[-500:]
    assert "File size limit exceeded" in r.log


def test_filling_the_disk_with_many_files_is_stopped_at_the_disk_limit(sandbox):
    """Each file under max_file_mb, 60 of them: the disk guard stops the container near disk_mb."""
    sb, image, client = sandbox
    peak, stop = [0], threading.Event()

    def watch():  # the host's own view of the writable layer
        while not stop.wait(0.3):
            for row in client.api.containers(all=True, size=True, filters={"label": f"{LABEL}={owner()}"}):
                peak[0] = max(peak[0], int(row.get("SizeRw") or 0))

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    try:
        res = sb.run(image, "for i in $(seq 1 60); do dd if=/dev/zero of=/tmp/f$i bs=1M count=30 2>/dev/null; done; "
                     "sleep 30", [], runs=1, timeout_s=60)
    finally:
        stop.set()
        th.join(5)
    bound = (CFG.disk_mb + 512) * 2**20  # the limit plus one polling interval's writes
    contained = "disk limit" in res.error and res.killed and peak[0] <= bound
    LEDGER.attempt(AREA, "fill the disk with many files under the per-file limit", contained,
                   f"{res.error or 'not stopped'}; peak writable layer {peak[0] // 2**20} MB")
    assert contained, (res.error, peak[0] // 2**20)
    assert sb.live == set()


def test_sleep_forever_and_leftover_processes_do_not_survive(sandbox):
    tag = f"h1-leftover-{uuid.uuid4().hex[:8]}"
    res, r = run(sandbox, f"setsid sh -c 'exec -a {tag} sleep 1000' & nohup sh -c 'exec -a {tag} sleep 1000' & "
                          f"sleep 1000", timeout_s=3)
    time.sleep(1)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    survivors = [line for line in ps.splitlines() if tag in line]
    LEDGER.add(AREA, tried=1, faults=2, escapes=len(survivors))
    assert r.timed_out and not survivors
    _, _, client = sandbox
    assert _mine(client) == []


def _mine(client) -> list:
    """This process's sandbox containers (other suites may share the engine)."""
    return client.containers.list(all=True, filters={"label": f"{LABEL}={owner()}"})


def _empty():
    from swe_envs.envs.parsers import ParseResult

    return ParseResult("pytest")


def test_a_dockerfile_cannot_reach_the_engine_or_the_hosts_files(docker_engine, tmp_path):
    """Build-time containment: an LLM-written Dockerfile builds in the engine, not on the host.
    Its RUN steps see neither the engine's socket nor a host file, and a bind mount of the host's
    root (BuildKit syntax) is refused by the builder or sees only the build context."""
    from swe_envs.config import BuildConfig
    from swe_envs.images import Images

    client, base = docker_engine
    images = Images(client, BuildConfig(timeout_s=300, memory_mb=512, no_cache=True), access=None)
    secret = Path(tempfile.mkdtemp(prefix="host-secret-")) / "secret.txt"
    secret.write_text("host secret\n")
    probe = (f"FROM {base}\nRUN test ! -e /var/run/docker.sock && test ! -e /run/docker.sock"
             f" && test ! -e {secret} && ! cat /proc/1/root{secret} 2>/dev/null && echo contained\n")
    bind = f"FROM {base}\nRUN --mount=type=bind,source=/,target=/h cat /h{secret}\n"
    tags = [f"local/containment-probe:{uuid.uuid4().hex[:12]}", f"local/containment-bind:{uuid.uuid4().hex[:12]}"]
    try:
        res = images.build(tags[0], probe, b"")
        assert res.ok and "contained" in res.log, res.log[-2000:]
        res = images.build(tags[1], bind, b"")
        assert not res.ok and "host secret" not in res.log, res.log[-2000:]
    finally:
        for tag in tags:
            images.remove(tag)
        shutil.rmtree(secret.parent, ignore_errors=True)
    LEDGER.add(AREA, tried=2, faults=2)
