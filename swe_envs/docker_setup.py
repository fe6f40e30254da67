"""Bring up a Docker engine and the offline base image, idempotently.

No container registry is reachable here, so nothing can be pulled: the base image
``local/debian:bookworm`` is made with ``debootstrap`` from the machine's own Debian mirror
and ``docker import``. Everything else is built FROM it (containers reach the mirror).

``ensure_docker`` is what the test session and ``python -m swe_envs setup-docker`` call:
install ``docker.io`` + ``debootstrap`` when missing (root + apt-get), start ``dockerd``
when ``docker info`` fails, wait for it, build the base image once (skipped when the tag
exists). ``require_daemon`` is what jobs call: they never start daemons, they say how.
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
from pathlib import Path

from core.errors import UserError

BASE_TAG = "local/debian:bookworm"
START_HINT = "nohup dockerd --storage-driver=overlay2 >/var/log/dockerd.log 2>&1 &"
LOCK_PATH = Path(tempfile.gettempdir()) / "swe_envs-docker-setup.lock"


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


def docker_ok() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "the docker CLI is not installed"
    proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return True, proc.stdout.strip()


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


def _install_packages(packages: list[str], log: Callable[[str], None]) -> None:
    if not (_is_root() and shutil.which("apt-get")):
        raise UserError(f"missing {' '.join(packages)}; install them with: apt-get install -y {' '.join(packages)}")
    log(f"installing {' '.join(packages)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise UserError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}")


def _start_daemon(log: Callable[[str], None], wait_s: float) -> None:
    if not _is_root() or shutil.which("dockerd") is None:
        require_daemon()
    logfile = Path("/var/log/dockerd.log")
    log(f"starting dockerd (overlay2), log in {logfile}")
    with open(logfile, "ab") as fh:
        # a new session: the daemon must outlive the test run that started it
        subprocess.Popen(["dockerd", "--storage-driver=overlay2"], stdout=fh, stderr=fh,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if docker_ok()[0]:
            return
        time.sleep(1)
    raise UserError(f"dockerd did not answer within {wait_s:.0f}s; see {logfile}")


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def build_base_image(tag: str, mirror: str, log: Callable[[str], None], suite: str = "bookworm") -> None:
    """debootstrap --variant=minbase SUITE ROOTFS MIRROR | docker import (about 2 minutes)."""
    log(f"building {tag} with debootstrap from {mirror}")
    workdir = Path(tempfile.mkdtemp(prefix="swe-rootfs-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    rootfs = workdir / "rootfs"
    try:
        proc = subprocess.run(["debootstrap", "--variant=minbase", suite, str(rootfs), mirror],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise UserError(f"debootstrap failed: {(proc.stdout + proc.stderr).strip()[-400:]}")
        # the image's apt must use the same mirror for the language images' apt-get install
        (rootfs / "etc/apt/sources.list").write_text(
            f"deb {mirror} {suite} main\ndeb {mirror} {suite}-updates main\n", encoding="utf-8")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise UserError(f"docker import failed: {imp.stderr.strip()[-300:]}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def ensure_docker(
    base_tag: str = BASE_TAG, log: Callable[[str], None] = _noop, wait_s: float = 90.0
) -> str:
    """Install, start and seed Docker as needed; returns the engine's version. Idempotent."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "w") as lock:
        # two test sessions (or agents) starting at once must not run two debootstraps
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [pkg for pkg, exe in (("docker.io", "docker"), ("debootstrap", "debootstrap"))
                   if shutil.which(exe) is None and not Path("/usr/sbin", exe).exists()]
        if missing:
            _install_packages(missing, log)
        ok, version = docker_ok()
        if not ok:
            _start_daemon(log, wait_s)
            version = docker_ok()[1]
        if not image_exists(base_tag):
            if shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists():
                raise UserError("debootstrap is not installed; install it with: apt-get install -y debootstrap")
            build_base_image(base_tag, apt_mirror(), log)
        return version
