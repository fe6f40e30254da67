"""Running test commands in throwaway containers.

Each run: no network (unless the environment spec asks for one), CPU / memory / pids limits, the image's non-root user, all
capabilities dropped, no host mounts except the task directory (read-only at /task). Inside,
``run.sh`` applies the patches, then runs the test command ``runs`` times, each under
``timeout`` (the whole process group is killed at the limit); the host kills the container
past the sum of those limits. Logs and exit codes are written in the container and copied
out with ``get_archive`` after it stops; the container is removed in a ``finally``, and
``close`` removes every live one when a batch is interrupted (the CLI turns SIGTERM into one).
Containers carry an owner label, so ones left by a killed process can be swept.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from swe_envs import untrusted_network
from swe_envs.config import SandboxConfig
from swe_envs.disk_guard import DiskGuard, fsize_ulimit

LABEL = "swe_envs.owner"
PATCH_FAILED_RC = 97

RUN_SH = """#!/bin/sh
cd /testbed || exit 90
mkdir -p /tmp/swe-out
for p in {task}/patches/*.diff; do
  [ -s "$p" ] || continue
  # git apply first; then GNU patch with fuzz, as SWE-bench's harness does for model patches
  if ! git apply --whitespace=nowarn "$p" >/tmp/swe-out/apply.log 2>&1 &&
     ! patch --batch --fuzz=5 -p1 -i "$p" >>/tmp/swe-out/apply.log 2>&1; then
    echo "$p" > /tmp/swe-out/patch_failed
    exit {patch_rc}
  fi
done
i=1
while [ $i -le {runs} ]; do
  # the log is capped: a suite printing gigabytes gets SIGPIPE at the cap, and the host never
  # reads more than that
  {{ timeout -k 5 {timeout} sh {task}/test.sh 2>&1; echo $? > /tmp/swe-out/run-$i.rc; }} |
    head -c {max_log} > /tmp/swe-out/run-$i.log
  i=$((i + 1))
done
"""


@dataclass
class RunLog:
    log: str
    rc: int
    timed_out: bool
    output_limited: bool = False  # the log reached sandbox.max_log_mb and the run was cut there


@dataclass
class SandboxResult:
    runs: list[RunLog] = field(default_factory=list)
    container_rc: int | None = None
    killed: bool = False  # the host killed the container at its wall-clock limit
    patch_failed: str = ""
    error: str = ""
    seconds: float = 0.0


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def container_options(cfg: SandboxConfig) -> dict:
    """What every container running a repository's code gets (test runs here, SWE sessions): the
    image's non-root user, every capability dropped, ``no-new-privileges``, CPU/memory/pids limits,
    no file above ``max_file_mb`` (a suite cannot fill the host's disk with one file) and an
    environment of its own — nothing of the host's (its tokens, proxies, credentials) enters. The
    root file system stays writable: suites write their tree (build outputs, caches, ``.pyc``), so
    its growth is bounded by the disk guard instead."""
    return dict(user=cfg.user, nano_cpus=int(cfg.cpus * 1e9), mem_limit=f"{cfg.memory_mb}m",
                memswap_limit=f"{cfg.memory_mb}m", pids_limit=cfg.pids, cap_drop=["ALL"],
                security_opt=["no-new-privileges"], init=True, ulimits=[fsize_ulimit(cfg.max_file_mb)],
                environment={"HOME": "/home/swe", "CI": "true"})


class Sandbox:
    def __init__(self, client: docker.DockerClient, cfg: SandboxConfig):
        self.client, self.cfg = client, cfg
        self.live: set[str] = set()  # containers of this sandbox not yet removed
        self.closed = False
        self._lock = threading.Lock()

    def close(self) -> None:
        """Remove every container still alive and refuse new ones (a batch is over or interrupted)."""
        with self._lock:
            ids, self.live, self.closed = list(self.live), set(), True
        for cid in ids:
            _quiet(lambda cid=cid: self.client.api.remove_container(cid, force=True))

    def run(self, image: str, test_command: str, patches: list[tuple[str, str]], runs: int = 1,
            timeout_s: float | None = None, network: str | None = None) -> SandboxResult:
        """``network``: "none" (default: sandbox.network) or a Docker network such as "bridge"."""
        timeout_s = timeout_s or self.cfg.test_timeout_s
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="swe-task-") as tmp:
            task = Path(tmp)
            (task / "patches").mkdir()
            for i, (name, text) in enumerate(patches):
                if text.strip():
                    (task / "patches" / f"{i:02d}-{name}.diff").write_text(
                        text if text.endswith("\n") else text + "\n", encoding="utf-8")
            (task / "test.sh").write_text(test_command + "\n", encoding="utf-8")
            (task / "run.sh").write_text(
                RUN_SH.format(task="/task", patch_rc=PATCH_FAILED_RC, runs=runs, timeout=int(timeout_s + 0.999),
                              max_log=self.cfg.max_log_mb * 2**20),
                encoding="utf-8")
            for p in task.rglob("*"):  # readable by the container's unprivileged user
                p.chmod(0o755 if p.is_dir() else 0o644)
            task.chmod(0o755)
            result = self._run_container(image, task, runs * (timeout_s + 10) + self.cfg.container_margin_s,
                                         network or self.cfg.network)
        result.seconds = time.monotonic() - t0
        return result

    def _run_container(self, image: str, task: Path, wall_s: float, network: str) -> SandboxResult:
        res = SandboxResult()
        container = None
        try:
            container = self.client.containers.create(
                image, ["sh", "/task/run.sh"], working_dir="/testbed",
                network_mode=untrusted_network.network(self.client) if network == "bridge" else network,
                volumes={str(task): {"bind": "/task", "mode": "ro"}},
                labels={LABEL: owner(), "swe_envs.run": uuid.uuid4().hex}, detach=True,
                **container_options(self.cfg),
            )
            with self._lock:
                self.live.add(container.id)
                closed = self.closed
            if closed:
                res.error = "sandbox closed (the batch was interrupted)"
                return res
            container.start()
            guard = DiskGuard(self.client.api, self.cfg.disk_mb)  # many files, each under max_file_mb
            guard.watch(container.id)
            try:
                status = container.wait(timeout=wall_s)
                res.container_rc = int(status.get("StatusCode", -1))
            except Exception:  # requests' ReadTimeout / ConnectionError: past the wall-clock limit
                res.killed = True
                _quiet(container.kill)
                _quiet(lambda: container.wait(timeout=30))
            finally:
                guard.stop()
            if guard.exceeded:
                res.killed, res.error = True, guard.exceeded
            files = _read_dir(container, "/tmp/swe-out", self.cfg.max_log_mb * 2**20)
            res.patch_failed = files.get("patch_failed", "").strip()
            if res.patch_failed:
                res.patch_failed += ": " + files.get("apply.log", "").strip()[:500]
            i = 1
            while f"run-{i}.log" in files or f"run-{i}.rc" in files:
                rc_text = files.get(f"run-{i}.rc", "").strip()
                rc = int(rc_text) if rc_text.lstrip("-").isdigit() else -1
                log = files.get(f"run-{i}.log", "")
                limited = len(log.encode("utf-8", "replace")) >= self.cfg.max_log_mb * 2**20 - 4
                res.runs.append(RunLog(log, rc, rc in (124, 137) or not rc_text, limited))
                i += 1
        except docker.errors.DockerException as err:
            res.error = f"docker: {err}"
        finally:
            if container is not None:
                _quiet(lambda: container.remove(force=True))
                with self._lock:
                    self.live.discard(container.id)
        return res


def _quiet(fn) -> None:
    try:
        fn()
    except Exception:
        pass


class _CappedStream(io.RawIOBase):
    """The archive stream, refusing to deliver more than ``limit`` bytes: the suite can write
    into the output directory too, and the host must not read gigabytes back."""

    def __init__(self, chunks, limit: int):
        self.chunks, self.limit, self.buf, self.seen = iter(chunks), limit, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self.buf:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.seen += len(chunk)
            if self.seen > self.limit:
                raise OSError(f"sandbox outputs over {self.limit} bytes")
            self.buf = chunk
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def _read_dir(container, path: str, max_file_bytes: int = 64 * 2**20) -> dict[str, str]:
    try:
        stream, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return {}
    out = {}
    capped = io.BufferedReader(_CappedStream(stream, 4 * max_file_bytes + 2**20))
    try:
        with tarfile.open(fileobj=capped, mode="r|") as tar:
            for m in tar:
                if m.isfile():
                    data = tar.extractfile(m).read(max_file_bytes)
                    out[m.name.split("/", 1)[-1]] = data.decode("utf-8", "replace")
    except (OSError, tarfile.TarError) as err:  # what was read so far stands; the rest is refused
        out.setdefault("_read_error", str(err))
    return out


def sweep_orphans(client: docker.DockerClient) -> int:
    """Remove containers labelled by a process of this host that no longer exists."""
    host = socket.gethostname()
    removed = 0
    # ignore_removed: a container removed between the listing and its inspection (another run's
    # sandbox closing, a second sweep on the same engine) is no error here, it is already gone
    for c in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        who = c.labels.get(LABEL, "")
        h, _, pid = who.rpartition(":")
        if h == host and pid.isdigit() and not _alive(int(pid)):
            _quiet(lambda c=c: c.remove(force=True))
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

