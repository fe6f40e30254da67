"""Hostile terminal-task and agent commands, run exactly as the Harbor runner runs them.

A tiny task FROM the offline Debian base is built and started with the runner's defaults (offline,
limits, no host mounts, every capability dropped, no-new-privileges); each hostile command is what an
agent's `bash` tool call or a task's `solve.sh` could run. The host checks from outside where it can (a listener on every
host interface got no connection, the host's free disk did not drop past the limit, no container
survives); `make chaos`'s table records each attempt with the reason it was contained."""

from __future__ import annotations

import shutil
import subprocess
import threading
import uuid

import pytest

from swe_envs.terminal.config import TerminalConfig
from swe_envs.terminal.task import load_task
from tests.reliability.ledger import LEDGER
from tests.reliability.test_containment import Listener, _host_ips
from tests.swe_envs.terminal.tiny_tasks import tiny_task

pytestmark = pytest.mark.docker
AREA = "containment: terminal tasks and agent commands"
DISK_MB = 256
# Linux capability numbers (linux/capability.h), in order
CAPS = ("CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
        "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT "
        "SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE "
        "AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ "
        "PERFMON BPF CHECKPOINT_RESTORE").split()


def cap_mask(names: list[str]) -> int:
    """The bits of capability names (``CAP_`` prefix optional), as /proc/PID/status prints them."""
    return sum(1 << CAPS.index(n.upper().removeprefix("CAP_")) for n in names)


@pytest.fixture(scope="module")
def started(docker_engine, tmp_path_factory):
    """Start a fresh environment of the tiny task (built once); every one is closed at the end."""
    from swe_envs.terminal.environment import Environment
    from swe_envs.terminal.trial import Context

    cfg = TerminalConfig.model_validate({"runner": {"disk_mb": DISK_MB, "pids": 128}})
    ctx = Context(cfg, log=lambda m: None)
    task = load_task(tiny_task(tmp_path_factory.mktemp("hostile"), name="hostile"))
    built = ctx.build(task)
    assert built.ok, built.error
    opened = []

    def start():
        opened.append(Environment(ctx.client, task, built, cfg.runner))
        return opened[-1], ctx.client

    yield start
    for environment in opened:
        environment.close()


@pytest.fixture
def env(started):
    """Each hostile command gets its own container: a bomb leaves nothing for the next one."""
    environment, client = started()
    yield environment, client
    environment.close()


def hostile(env, name: str, command: str, escaped_if: str, timeout_s: float = 30) -> tuple[bool, str]:
    """Run one agent command; it escaped when its output holds the marker ``escaped_if``."""
    environment, _ = env
    res = environment.exec(command, timeout_s=timeout_s)
    contained = escaped_if not in res.output
    tail = " | ".join(res.output.strip().splitlines()[-2:])[:200]
    reason = f"rc {res.rc}{' (time limit)' if res.timed_out else ''}: {tail}" if contained else f"ESCAPED: {tail}"
    LEDGER.attempt(AREA, name, contained, reason)
    return contained, reason


@pytest.mark.area(AREA)
def test_no_docker_socket_and_no_dangerous_capabilities(env):
    ok1, r1 = hostile(env, "the Docker socket", "ls -l /var/run/docker.sock /run/docker.sock 2>&1; "
                      "for s in /var/run/docker.sock /run/docker.sock; do [ -S $s ] && echo SOCKET-FOUND; done",
                      "SOCKET-FOUND")
    # every capability is dropped but runner.cap_add (isolation.py): the effective, permitted and bounding
    # sets hold nothing else, so not even a setuid-root binary could regain one
    allowed = cap_mask(TerminalConfig().runner.cap_add)
    caps = ("for s in CapEff CapPrm CapBnd; do v=$(grep $s /proc/self/status | cut -f2); echo $s=$v; "
            f"[ $((0x$v & ~{allowed})) != 0 ] && echo HAS-CAP-$s; done; echo uid=$(id -u)")
    ok2, r2 = hostile(env, "a capability beyond runner.cap_add (DAC_OVERRIDE, SETUID, NET_RAW, SYS_ADMIN, ...)",
                      caps, "HAS-CAP")
    assert ok1 and ok2, (r1, r2)


@pytest.mark.area(AREA)
def test_a_secret_in_the_hosts_environment_is_not_visible(started, monkeypatch):
    """A secret in the runner's own environment (a CI token) reaches neither the agent's commands nor the
    verifier's: the environment is started after the secret is set, as a job's would be."""
    secret = f"host-env-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GLM5_HOSTILE_SECRET", secret)
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    environment, client = started()
    try:
        ok, reason = hostile((environment, client), "read a secret set in the host's environment (env, /proc/*/environ)",
                             "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null", secret)
    finally:
        environment.close()
    assert ok, reason


@pytest.mark.area(AREA)
def test_mounts_and_proc_sys_are_refused(env):
    ok1, r1 = hostile(env, "mount a file system", "mkdir -p /mnt/x; mount -t tmpfs none /mnt/x 2>&1 && echo MOUNTED; "
                      "mount --bind / /mnt/x 2>&1 && echo MOUNTED; mount -t proc proc /mnt/x 2>&1 && echo MOUNTED",
                      "MOUNTED")
    ok2, r2 = hostile(env, "write /proc/sys (host kernel settings)",
                      "for f in /proc/sys/vm/drop_caches /proc/sys/kernel/core_pattern /proc/sys/net/ipv4/ip_forward "
                      "/proc/sysrq-trigger; do [ -w $f ] && echo WRITABLE $f; done; "
                      "echo 1 > /proc/sys/vm/drop_caches 2>&1 && echo WRITABLE-drop_caches", "WRITABLE")
    assert ok1 and ok2, (r1, r2)


@pytest.mark.area(AREA)
def test_setuid_binaries_give_no_privilege(env):
    """Root (the image's user) makes a setuid-root copy of ``id``; a command running as nobody (a task's
    [agent].user, say) runs it: ``no-new-privileges`` keeps its uid, and without SETUID nobody can
    switch users by any other route either."""
    environment, _ = env
    made = environment.exec("cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id && ls -l /tmp/suid-id",
                            timeout_s=30, user="")
    assert made.rc == 0 and "rwsr-xr-x" in made.output, made.output
    cmd = ('echo uid=$(id -u) suid=$(/tmp/suid-id -u); [ "$(/tmp/suid-id -u)" = 0 ] && echo GOT-ROOT; '
           "setpriv --reuid 0 id -u 2>&1 | tail -1; su -c 'echo GOT-ROOT' root </dev/null 2>&1 | tail -1")
    res = environment.exec(cmd, timeout_s=30, user="65534:65534")
    contained = "GOT-ROOT" not in res.output and "uid=65534 suid=65534" in res.output
    tail = " | ".join(res.output.strip().splitlines()[-3:])[:200]
    LEDGER.attempt(AREA, "a setuid-root binary (and setpriv, su) run by an unprivileged user", contained,
                   f"rc {res.rc}: {tail}" if contained else f"ESCAPED: {tail}")
    assert contained, res.output


@pytest.mark.area(AREA)
def test_the_hosts_listeners_are_unreachable(env):
    listener = Listener()
    try:
        targets = ["127.0.0.1", *_host_ips()]
        cmd = "; ".join(f"(exec 3<>/dev/tcp/{ip}/{listener.port}) 2>/dev/null && echo REACHED-{ip}" for ip in targets)
        ok, reason = hostile(env, "a listener on the host (loopback and every host address)", "timeout 20 bash -c "
                             + repr(cmd), "REACHED")
    finally:
        listener.close()
    assert ok and listener.hits == 0, (reason, listener.hits)


@pytest.mark.area(AREA)
def test_fork_bomb_hits_the_pids_limit(env):
    ok, reason = hostile(env, "fork bomb", "bomb() { bomb | bomb & }; timeout 10 bash -c 'bomb() { bomb | bomb & }; bomb; "
                         "sleep 5'; n=$(ls /proc | grep -c '^[0-9]'); echo procs=$n; [ $n -gt 200 ] && echo TOO-MANY",
                         "TOO-MANY", timeout_s=40)
    assert ok, reason


@pytest.mark.area(AREA)
def test_memory_bomb_is_killed_at_the_memory_limit(env):
    # awk doubles a string until something stops it; the cgroup's own peak says whether the limit held
    cmd = ("awk 'BEGIN{s=\"x\"; while(1) s = s s}'; rc=$?; "
           "lim=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes); "
           "peak=$(cat /sys/fs/cgroup/memory.peak 2>/dev/null || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes); "
           "echo rc=$rc peak=$peak limit=$lim; { [ $rc = 0 ] || [ \"$peak\" -gt \"$lim\" ]; } && echo OVER-LIMIT")
    ok, reason = hostile(env, "memory bomb", cmd, "OVER-LIMIT", timeout_s=60)
    assert ok, reason


@pytest.mark.area(AREA)
def test_disk_bomb_is_stopped_at_the_disk_limit(env):
    """One file and many files: the writable layer never grows far past runner.disk_mb."""
    environment, client = env
    before = shutil.disk_usage("/var/lib/docker" if shutil.os.path.isdir("/var/lib/docker") else "/").free
    peak = [0]
    stop = threading.Event()

    def watch():  # the host's own view of the container's writable layer
        while not stop.wait(0.5):
            rows = client.api.containers(all=True, size=True, filters={"id": environment.main.id})
            if not rows:
                return
            peak[0] = max(peak[0], int(rows[0].get("SizeRw") or 0))

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    try:
        res = environment.exec("dd if=/dev/zero of=/big bs=1M count=2048 2>&1 | tail -1; "
                               "for i in $(seq 1 40); do dd if=/dev/zero of=/f$i bs=1M count=64 2>/dev/null || break; "
                               "done; du -sm / --exclude=/proc --exclude=/sys 2>/dev/null | tail -1", timeout_s=120)
    finally:
        stop.set()
        th.join(5)
    # the host's free disk is only reported: other jobs on the machine move it too
    used = before - shutil.disk_usage("/var/lib/docker" if shutil.os.path.isdir("/var/lib/docker") else "/").free
    bound = (DISK_MB + 512) * 2**20  # the limit plus one polling interval's writes (0.5 s)
    stopped = "disk limit" in res.output
    contained = peak[0] <= bound and stopped
    reason = (f"stopped by the guard: {stopped}; writable layer peaked at {peak[0] // 2**20} MB (limit {DISK_MB} MB, "
              f"bound {bound // 2**20} MB); host free disk -{used // 2**20} MB meanwhile")
    LEDGER.attempt(AREA, "disk bomb (one 2 GB file, then 40 x 64 MB)", contained, reason if contained else "ESCAPED: " + reason)
    assert contained, reason


def test_nothing_survives_the_environments(docker_engine):
    """Every hostile command's container is gone once it closed (the host's view, by the owner label)."""
    from swe_envs.sandbox import LABEL, owner

    out = subprocess.run(["docker", "ps", "-a", "--filter", f"label={LABEL}={owner()}", "--filter",
                          "name=terminal-", "-q"], capture_output=True, text=True).stdout.split()
    assert out == []


@pytest.mark.area(AREA)
def test_a_task_dockerfile_cannot_reach_the_host(docker_engine, tmp_path, monkeypatch):
    """Build time: an LLM-written or task-supplied Dockerfile of a no-network task tries a listener on the
    host's loopback and every host address, the engine's socket, and the host's environment."""
    from swe_envs import untrusted_network
    from swe_envs.terminal.trial import Context

    secret = f"host-env-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GLM5_HOSTILE_SECRET", secret)
    listener = Listener()
    try:
        probes = " ; ".join(f"(exec 3<>/dev/tcp/{ip}/{listener.port}) 2>/dev/null && echo REACHED-{ip}"
                            for ip in ["127.0.0.1", *_host_ips()])
        # each finding is echoed by a variable, so the RUN line in the log never matches itself
        dockerfile = (f"FROM local/debian:bookworm\nRUN timeout 20 bash -c {probes!r} ; "
                      "for s in /var/run/docker.sock /run/docker.sock; do [ -e $s ] && w=SOCKET && echo $w-FOUND; done; "
                      "env | grep -q GLM5_HOSTILE_SECRET && w=SECRET && echo $w-FOUND; "
                      f"echo probe-{tmp_path.name}\n")
        task = load_task(tiny_task(tmp_path, name="hostile-build", dockerfile=dockerfile))
        built = Context(TerminalConfig(), log=lambda m: None).build(task)
    finally:
        listener.close()
    lines = built.log.splitlines()
    reached = [line for line in lines if line.startswith("REACHED-")]  # not the RUN line itself
    net = built.network
    contained = built.ok and not reached and listener.hits == 0
    LEDGER.attempt(AREA, "a task's Dockerfile reaching a listener on the host (loopback, every address)", contained,
                   f"built {built.ok} on {net.get('network')}, listener hits {listener.hits}" + ("" if contained else ": ESCAPED"))
    socket_ok = built.ok and "SOCKET-FOUND" not in lines
    LEDGER.attempt(AREA, "a task's Dockerfile reaching the Docker socket", socket_ok,
                   "no engine socket in the build container" if socket_ok else "ESCAPED: the socket is there")
    env_ok = built.ok and "SECRET-FOUND" not in lines and secret not in built.log
    LEDGER.attempt(AREA, "a task's Dockerfile reading a secret set in the host's environment", env_ok,
                   "not in the build's environment" if env_ok else "ESCAPED: the secret is in the build")
    # where the host cannot be closed off, builds run on the default bridge: that is counted, not hidden
    fallback = untrusted_network.unavailable(docker_engine[0])
    LEDGER.attempt(AREA, "builds run where the host's services are rejected (no silent default-bridge fallback)",
                   not fallback and not net.get("host_reachable"),
                   f"on {net.get('network')}" if not fallback else f"ESCAPED: default bridge, {fallback}")
    assert contained and socket_ok and env_ok, (built.error, built.log[-1000:], listener.hits)
    assert not fallback and net == {"network": untrusted_network.NAME, "host_reachable": False, "why": ""}
