"""Bring up a Docker engine and the offline base image, idempotently.

No container registry is reachable here, so nothing can be pulled: the base image
``local/debian:bookworm`` is made with ``debootstrap`` from the machine's own Debian mirror
and ``docker import``. Everything else is built FROM it (containers reach the mirror).

``ensure_docker`` is what the test session and ``python -m swe_envs setup-docker`` call.
It decides from the engine, never from the client alone: when no engine answers ``docker info``
and no ``dockerd`` exists, it installs ``docker.io`` (root + apt-get), plus ``debootstrap`` when
the base image is missing; then starts ``dockerd``, waits for it, and builds the base image once
(skipped when the tag exists). ``require_daemon`` is what jobs call: they never start daemons, they say how.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError

BASE_TAG = "local/debian:bookworm"
START_HINT = "nohup dockerd --storage-driver=overlay2 >/var/log/dockerd.log 2>&1 &"
DOCKERD_PID = Path("/var/run/docker.pid")
LOCK_PATH = Path(tempfile.gettempdir()) / "swe_envs-docker-setup.lock"
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def _noop(_msg: str) -> None:
    pass


def apt_mirror(suite: str = "bookworm", roots: tuple[str, ...] = ("/etc/apt",)) -> str:
    """The Debian mirror URI this machine's apt uses for ``suite`` (deb822 or one-line format)."""
    for root in roots:
        for path in sorted(Path(root, "sources.list.d").glob("*.sources")):
            for stanza in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.split()
                if "deb" in fields.get("types", []) and suite in fields.get("suites", []) and fields.get("uris"):
                    return fields["uris"][0]
        lists = [Path(root, "sources.list"), *sorted(Path(root, "sources.list.d").glob("*.list"))]
        for path in lists:
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                    return parts[1]
    raise UserError(f"no apt source for '{suite}' in /etc/apt/sources.list or sources.list.d/*.sources")


def _search_path(path: str | None = None) -> str:
    """PATH plus the sbin directories: apt installs ``dockerd`` and ``debootstrap`` there, and a
    non-login root shell (cron, CI runners, ``sudo -E``) often lacks them on PATH."""
    if path is not None:
        return path
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(dirs + [d for d in SBIN_DIRS if d not in dirs])


def find_tool(name: str, path: str | None = None) -> str | None:
    return shutil.which(name, path=_search_path(path))


def docker_ok(path: str | None = None) -> tuple[bool, str]:
    """(True, server version) when an engine answers the docker CLI; (False, why) otherwise."""
    cli = find_tool("docker", path)
    if cli is None:
        return False, "the docker CLI is not installed"
    try:
        proc = subprocess.run([cli, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return False, "docker info did not answer within 60s"
    # a client with no engine may still exit 0 and print an empty server version (or an error line)
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version or " " in version:
        return False, (proc.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return True, version


def require_daemon() -> None:
    """Raise one clear UserError (with the command to fix it) when no engine answers."""
    ok, detail = docker_ok()
    if not ok:
        raise UserError(
            f"Docker daemon is not running ({detail}); start it with: {START_HINT} "
            "(or: python -m swe_envs setup-docker)"
        )


def docker_client(timeout: float = 120.0):
    """A docker SDK client for the configured engine, or one clear UserError saying how to start it."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
        return client
    except (docker.errors.DockerException, OSError) as err:
        detail = str(err).splitlines()[0][:200]
        raise UserError(
            f"Docker daemon is not reachable ({detail}); start it with: {START_HINT} "
            "(or: python -m swe_envs setup-docker)"
        ) from None


def _is_root() -> bool:
    return os.geteuid() == 0


@dataclass(frozen=True)
class MachineState:
    """What ``ensure_docker`` decides from. The engine, not the client, says whether Docker is there:
    a docker CLI alone (docker-ce-cli, a remote-engine setup, a preinstalled client) runs nothing."""

    engine_answers: bool
    engine_detail: str
    docker_cli: str | None
    dockerd: str | None
    debootstrap: str | None
    base_image: bool
    root: bool
    apt_get: str | None


def probe(base_tag: str = BASE_TAG, path: str | None = None) -> MachineState:
    ok, detail = docker_ok(path)
    return MachineState(
        engine_answers=ok, engine_detail=detail, docker_cli=find_tool("docker", path),
        dockerd=find_tool("dockerd", path), debootstrap=find_tool("debootstrap", path),
        base_image=ok and image_exists(base_tag, path), root=_is_root(), apt_get=find_tool("apt-get", path))


def packages_to_install(state: MachineState) -> list[str]:
    """Debian packages needed before the engine can run and the base image can be built."""
    missing = []
    # an answering engine is enough; otherwise we need a daemon to start and a CLI to talk to it
    if not state.engine_answers and (state.dockerd is None or state.docker_cli is None):
        missing.append("docker.io")
    if not state.base_image and state.debootstrap is None:
        missing.append("debootstrap")
    return missing


def _install_packages(packages: list[str], state: MachineState, log: Callable[[str], None]) -> None:
    if not (state.root and state.apt_get):
        why = state.engine_detail if "docker.io" in packages else "the base image needs debootstrap"
        raise UserError(f"no Docker engine here ({why}) and not root with apt-get; as root run: "
                        f"apt-get install -y {' '.join(packages)} (or point DOCKER_HOST at an engine)")
    log(f"installing {' '.join(packages)} with apt-get (no engine: {state.engine_detail})"
        if "docker.io" in packages else f"installing {' '.join(packages)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([state.apt_get, "update", "-qq"], [state.apt_get, "install", "-y", "-qq", *packages]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise UserError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}")


def _is_dockerd(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` is a running dockerd: after a restart the old id is often another process's
    (or a thread's: dockerd's own check only asks whether /proc/<pid> exists)."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return fields.get("Tgid", "").strip() == str(pid) and fields.get("Name", "").strip() == "dockerd"


def clear_stale_pidfile(pidfile: Path = DOCKERD_PID, log: Callable[[str], None] = _noop,
                        proc: Path = Path("/proc")) -> bool:
    """Remove dockerd's pid file unless a dockerd of that id runs: a machine restarted without a
    clean daemon stop keeps it, and dockerd refuses to start over it ("pid file found")."""
    try:
        text = pidfile.read_text().strip()
    except FileNotFoundError:
        return False
    pid = int(text) if text.isdigit() else 0
    if pid > 0 and _is_dockerd(pid, proc):
        return False
    pidfile.unlink(missing_ok=True)
    log(f"removed {pidfile}: no dockerd runs as {text or 'an empty id'} (a daemon that did not stop cleanly)")
    return True


def _start_daemon(state: MachineState, log: Callable[[str], None], wait_s: float,
                  path: str | None, logfile: Path, pidfile: Path = DOCKERD_PID) -> None:
    if state.dockerd is None:
        raise UserError(f"no Docker engine ({state.engine_detail}) and no dockerd to start; "
                        "install docker.io (python -m swe_envs setup-docker as root)")
    if not state.root:
        raise UserError(f"Docker daemon is not running ({state.engine_detail}); as root start it with: {START_HINT}")
    clear_stale_pidfile(pidfile, log)
    log(f"starting {state.dockerd} (overlay2), log in {logfile}")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=_search_path(path))  # dockerd finds containerd/runc next to itself
    with open(logfile, "ab") as fh:
        # a new session: the daemon must outlive the test run that started it
        daemon = subprocess.Popen([state.dockerd, "--storage-driver=overlay2"], stdout=fh, stderr=fh,
                                  stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if docker_ok(path)[0]:
            return
        if daemon.poll() is not None:
            tail = logfile.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
            raise UserError(f"dockerd exited with status {daemon.returncode}: {tail[0][:300]} (log: {logfile})")
        time.sleep(1)
    raise UserError(f"dockerd did not answer within {wait_s:.0f}s; see {logfile}")


def image_exists(tag: str, path: str | None = None) -> bool:
    cli = find_tool("docker", path) or "docker"
    return subprocess.run([cli, "image", "inspect", tag], capture_output=True).returncode == 0


def build_base_image(tag: str, mirror: str, log: Callable[[str], None], suite: str = "bookworm",
                     path: str | None = None) -> None:
    """debootstrap --variant=minbase SUITE ROOTFS MIRROR | docker import (about 2 minutes)."""
    debootstrap = find_tool("debootstrap", path)
    if debootstrap is None:
        raise UserError("debootstrap is not installed; install it with: apt-get install -y debootstrap")
    log(f"building {tag} with debootstrap from {mirror}")
    workdir = Path(tempfile.mkdtemp(prefix="swe-rootfs-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    rootfs = workdir / "rootfs"
    try:
        proc = subprocess.run([debootstrap, "--variant=minbase", suite, str(rootfs), mirror],
                              capture_output=True, text=True, env=dict(os.environ, PATH=_search_path(path)))
        if proc.returncode != 0:
            raise UserError(f"debootstrap failed: {(proc.stdout + proc.stderr).strip()[-400:]}")
        # the image's apt must use the same mirror for the language images' apt-get install
        (rootfs / "etc/apt/sources.list").write_text(
            f"deb {mirror} {suite} main\ndeb {mirror} {suite}-updates main\n", encoding="utf-8")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([find_tool("docker", path) or "docker", "import", "-", tag], stdin=tar.stdout,
                             capture_output=True, text=True)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise UserError(f"docker import failed: {imp.stderr.strip()[-300:]}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def ensure_docker(
    base_tag: str = BASE_TAG, log: Callable[[str], None] = _noop, wait_s: float = 90.0,
    path: str | None = None, logfile: Path = Path("/var/log/dockerd.log"), pidfile: Path = DOCKERD_PID,
) -> str:
    """Install, start and seed Docker as needed; returns the engine's version. Idempotent.

    ``path`` replaces PATH (+ sbin dirs) for finding docker, dockerd, debootstrap and apt-get:
    tests use it to present a machine with a client and no engine."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "w") as lock:
        # two test sessions (or agents) starting at once must not run two debootstraps
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = probe(base_tag, path)
        missing = packages_to_install(state)
        if missing:
            _install_packages(missing, state, log)
            state = probe(base_tag, path)
            if not state.engine_answers and state.dockerd is None:
                raise UserError(f"apt-get installed {' '.join(missing)} but no dockerd was found on "
                                f"{_search_path(path)}")
        if not state.engine_answers:
            _start_daemon(state, log, wait_s, path, logfile, pidfile)
            state = probe(base_tag, path)
        if not state.base_image:
            build_base_image(base_tag, apt_mirror(), log, path=path)
        return state.engine_detail
