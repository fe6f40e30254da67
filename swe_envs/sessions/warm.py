"""Warm images and warm verifier containers: what makes a SWE session's verify fast without weakening it.

Where a verify's time went (measured on the calc instance at load ~25 on 2 cores, 2026-12-02): of
15.5 s in the sandbox, ~2 s were the container's create/start/remove and ~13 s the test command,
whose tests took 0.35 s: environment images hold their Python packages without bytecode (``uv pip
install`` writes none) and the non-root test user cannot write it, so every run compiled pytest and
its dependencies again (``import pytest`` alone: 7-14 s at that load).

- ``warm_image``: the verified image plus one layer of compiled bytecode (``compileall`` over the
  interpreter's path and /testbed, run offline at build time; nothing of the repository runs). The
  same sources: a changed file's stale bytecode is recompiled by Python (its mtime is checked), so
  what a test sees is unchanged. Built once per source image, tagged by its id.
- ``Verifiers``: pristine containers of those images started ahead of need (``prime`` when a session
  opens), with the sandbox's limits, each used for one verify and removed; a verify copies the
  patches in (on its stdin: ``swe_envs.sessions.verifier_io``) and the container runs
  ``swe_envs.sandbox``'s own run script (patches, then the test command under its timeout, the log
  capped), a pytest command through its warm zygote (``swe_envs.sessions.zygote``). Nothing the agent's container holds is used but its diff.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
import uuid
from collections.abc import Callable

import docker.errors

from swe_envs.config import SandboxConfig
from swe_envs.disk_guard import DiskGuard
from swe_envs.images import sha
from swe_envs.sandbox import (
    LABEL,
    PATCH_FAILED_RC,
    RUN_SH,
    RunLog,
    SandboxResult,
    _read_dir,
    container_options,
    owner,
)
from swe_envs.sessions.background import Background
from swe_envs.sessions.verifier_io import TASK_DIR, Fallback, exchange, task_tar
from swe_envs.sessions.zygote import BOOT, ZYGOTE_PY, test_sh, zygote_launch

WARM_LABEL = "swe_envs.session.warm_from"
VERIFIER_LABEL = "swe_envs.session.verifier"
# compiled as root at build time, offline; /testbed's new __pycache__ dirs go back to its owner so the
# session's user can still rewrite them
COMPILE = ("PY=$(command -v python3 || command -v python || true); "
           "if [ -n \"$PY\" ]; then \"$PY\" -c \"import compileall, os, sys; "
           "[compileall.compile_dir(d, quiet=2, workers=0) for d in dict.fromkeys(sys.path[1:] + ['/testbed']) "
           "if d and os.path.isdir(d)]\" || true; "
           "[ -d /testbed ] && find /testbed -name __pycache__ -type d -exec chown -R \"$(stat -c %u:%g /testbed)\" "
           "{} + || true; fi")


class WarmImages:
    """``warm_image`` once per source image on one engine, however many sessions open it at once."""

    def __init__(self, client, log: Callable[[str], None] = print):
        self.client, self.log = client, log
        self.made: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, image: str) -> str:
        with self._lock:
            lock = self._locks.setdefault(image, threading.Lock())
        with lock:
            if image not in self.made:
                self.made[image] = warm_image(self.client, image, self.log)
            return self.made[image]


def warm_image(client, image: str, log: Callable[[str], None] = print, timeout_s: float = 1800.0) -> str:
    """``image`` with its Python bytecode compiled (built once, cached by the source image's id);
    ``image`` itself when it cannot be made (the warm layer only saves time)."""
    try:
        src = client.images.get(image)
    except docker.errors.ImageNotFound:
        return image
    if src.labels.get(WARM_LABEL):
        return image
    user = src.attrs.get("Config", {}).get("User") or "root"
    dockerfile = f"FROM {src.id}\nUSER root\nRUN {COMPILE}\nUSER {user}\n"
    tag = f"swe-sessions/warm:{sha(src.id, dockerfile)[:16]}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    t0 = time.monotonic()
    ctx = io.BytesIO()
    with tarfile.open(fileobj=ctx, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    error = ""
    try:
        # on the client's own engine (a session host's), offline; timeout: the read timeout of a silent step
        for chunk in client.api.build(fileobj=io.BytesIO(ctx.getvalue()), custom_context=True, tag=tag, rm=True,
                                      forcerm=True, pull=False, decode=True, network_mode="none",
                                      labels={WARM_LABEL: src.id}, timeout=int(timeout_s)):
            error = error or chunk.get("error", "")
    except Exception as err:  # a stalled or refused build: the source image serves, slower
        error = f"{type(err).__name__}: {err}"
    if error:
        log(f"warm image of {image}: not built ({error[:200]}); verifying on the image itself")
        return image
    log(f"warm image of {image}: {tag} in {time.monotonic() - t0:.1f}s")
    return tag


class Verifiers:
    """Pristine containers per (image, network, test command), ``per_image`` kept started ahead of
    need; each verifies once and is removed. Labelled with the owner, so a killed process's are swept."""

    def __init__(self, client, cfg: SandboxConfig, per_image: int = 1, log: Callable[[str], None] = print):
        self.client, self.cfg, self.per_image, self.log = client, cfg, per_image, log
        self.ready: dict[tuple[str, str, str], list] = {}
        self.starting: dict[tuple[str, str, str], int] = {}
        self.closed = False
        self._lock = threading.Lock()
        self._background = Background()  # the prime and remove threads in flight: ``shutdown`` waits for them

    def _start(self, image: str, network: str, command: str):
        """The sandbox's container (same limits, user, labels), its main process ``BOOT``: it waits for
        the task on its stdin and then runs the sandbox's run script; a pytest command gets its zygote."""
        opts = container_options(self.cfg)  # the sandbox's, so a verifier is contained as a test run is
        launch = zygote_launch(command)
        if launch:
            opts["environment"] = dict(opts["environment"], SWE_ZYGOTE=launch, SWE_ZYGOTE_PY=ZYGOTE_PY)
        return self.client.containers.run(
            image, ["sh", "-c", BOOT], detach=True, stdin_open=True, working_dir="/testbed", network_mode=network,
            labels={LABEL: owner(), VERIFIER_LABEL: image, "swe_envs.run": uuid.uuid4().hex}, **opts)

    def prime(self, image: str, network: str, command: str) -> None:
        """Start one in the background unless ``per_image`` are ready or starting."""
        key = (image, network, command)
        with self._lock:
            if self.closed or len(self.ready.get(key, [])) + self.starting.get(key, 0) >= self.per_image:
                return
            self.starting[key] = self.starting.get(key, 0) + 1

        def start() -> None:
            try:
                c = self._start(*key)
            except docker.errors.DockerException as err:
                self.log(f"verifier for {image}: not started ({err})")
                c = None
            with self._lock:
                self.starting[key] -= 1
                if c is not None and not self.closed:
                    self.ready.setdefault(key, []).append(c)
                    c = None
            if c is not None:  # shut down while it started
                _remove(c)

        self._background.spawn(start, "verifier-prime")

    def take(self, image: str, network: str, command: str):
        """A ready container (started ahead), or one started now. The caller primes the next one once
        its verify is done (``run``): started beside the verify, its container and zygote took the
        CPU the verify's tests needed on a small host."""
        with self._lock:
            ready = self.ready.get((image, network, command), [])
            c = ready.pop(0) if ready else None
        return c if c is not None else self._start(image, network, command)

    def run(self, image: str, command: str, patches: list[tuple[str, str]], network: str = "none",
            timeout_s: float | None = None) -> SandboxResult:
        """The sandbox's run (patches in order, then ``command`` once under its timeout) in a warm container."""
        timeout_s = timeout_s or self.cfg.test_timeout_s
        t0 = time.monotonic()
        res = SandboxResult()
        try:
            c = self.take(image, network, command)
        except docker.errors.DockerException as err:
            res.error = f"docker: {err}"
            return res
        guard = DiskGuard(self.client.api, self.cfg.disk_mb)
        script = test_sh(command) if zygote_launch(command) else command
        wall_s = timeout_s + 10 + self.cfg.container_margin_s
        try:
            guard.watch(c.id)
            try:  # the task on stdin, the results back on stdout (verifier_io)
                files, rc = exchange(c, task_tar(self._task(script, patches, timeout_s, TASK_DIR)), wall_s,
                                     3 * self.cfg.max_log_mb * 2**20)
                res.container_rc = rc
                self._read(files, res)
            except Fallback:  # copied in and read back through the archive API, as before
                c.put_archive("/", task_tar(self._task(script, patches, timeout_s, "/task"), prefix="task/"))
                self._wait(c, res, wall_s)
                if not res.killed and not guard.exceeded:
                    self._read(_read_dir(c, "/tmp/swe-out", self.cfg.max_log_mb * 2**20), res)
            except TimeoutError:  # socket.timeout: past the wall-clock limit
                res.killed = True
                _quiet(c.kill)
            except OSError as err:  # the attach transport failed: an error, never a verdict
                res.error = f"verifier transport: {err}"
                _quiet(c.kill)
            if guard.exceeded:
                res.killed, res.error, res.runs, res.patch_failed = True, guard.exceeded, [], ""
        except docker.errors.DockerException as err:
            res.error = f"docker: {err}"
        finally:
            guard.stop()
            # its results are read: removing it and starting the next one are off the verify's path
            self._background.spawn(lambda: _remove(c), "verifier-remove")
            self.prime(image, network, command)
        res.seconds = time.monotonic() - t0
        return res

    def _task(self, command: str, patches: list[tuple[str, str]], timeout_s: float, where: str) -> dict[str, str]:
        """The task's files (``ready`` last: BOOT starts once it exists), ``run.sh`` formatted for ``where``."""
        run_sh = RUN_SH.format(task=where, patch_rc=PATCH_FAILED_RC, runs=1, timeout=int(timeout_s + 0.999),
                               max_log=self.cfg.max_log_mb * 2**20)
        files = {"run.sh": run_sh, "test.sh": command + "\n"}
        for i, (name, text) in enumerate(patches):
            if text.strip():
                files[f"patches/{i:02d}-{name}.diff"] = text if text.endswith("\n") else text + "\n"
        files["ready"] = ""
        return files

    def _wait(self, c, res: SandboxResult, wall_s: float) -> None:
        try:
            res.container_rc = int(c.wait(timeout=wall_s).get("StatusCode", -1))
        except Exception:  # requests' ReadTimeout / ConnectionError: past the wall-clock limit
            res.killed = True
            _quiet(c.kill)

    def _read(self, files: dict[str, str], res: SandboxResult) -> None:
        """The sandbox's outputs (/tmp/swe-out's files) into ``res``."""
        res.patch_failed = files.get("patch_failed", "").strip()
        if res.patch_failed:
            res.patch_failed += ": " + files.get("apply.log", "").strip()[:500]
        if "run-1.log" in files or "run-1.rc" in files:
            rc_text = files.get("run-1.rc", "").strip()
            rc = int(rc_text) if rc_text.lstrip("-").isdigit() else -1
            log = files.get("run-1.log", "")
            limited = len(log.encode("utf-8", "replace")) >= self.cfg.max_log_mb * 2**20 - 4
            res.runs.append(RunLog(log, rc, rc in (124, 137) or not rc_text, limited))

    def shutdown(self, timeout_s: float = 120.0) -> None:
        """Remove the ready containers and wait for those being started (each removes its own once it
        sees ``closed``) or removed, so none outlives a clean exit; ``timeout_s``: a hung engine."""
        with self._lock:
            self.closed = True
            left = [c for cs in self.ready.values() for c in cs]
            self.ready.clear()
        for c in left:
            _remove(c)
        pending = self._background.wait(timeout_s)
        if pending:
            self.log(f"verifiers: {pending} start/remove still in flight after {timeout_s:.0f}s; "
                     "the reaper sweeps what they leave")

def _remove(c) -> None:
    _quiet(lambda: c.remove(force=True))


def _quiet(fn) -> None:
    try:
        fn()
    except Exception:
        pass
