"""How ``ensure_docker`` decides what to install and start.

A clean machine (no engine, apt reachable, root) is not available in CI, so these tests present one
through ``path``: a directory of small shell scripts standing in for the docker client, ``apt-get``,
``dockerd`` and ``debootstrap`` (test doubles, because running the real apt/dockerd would change the
host). They record their calls; the state they model (engine up, image present) lives in marker files.
The real install is exercised by ``python -m swe_envs setup-docker`` and the docker-marked suites.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from core.errors import UserError
from swe_envs import docker_setup
from swe_envs.docker_setup import MachineState, docker_ok, ensure_docker, packages_to_install

# the client a machine with docker-ce-cli and no engine has: `docker info` fails, prints no server
CLIENT = """#!/bin/sh
echo "docker $*" >> "{log}"
case "$1" in
  info) if [ -f "{state}/engine_up" ]; then echo 20.10.24+test; exit 0; fi
        echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1 ;;
  image) [ -f "{state}/image" ] ;;
  import) cat > /dev/null; touch "{state}/image" ;;
esac
"""
APT_GET = """#!/bin/sh
echo "apt-get $*" >> "{log}"
if [ "$1" = install ]; then
  for pkg in "$@"; do
    case "$pkg" in
      docker.io) cp "{stubs}/dockerd" "{bin}/dockerd" ;;
      debootstrap) cp "{stubs}/debootstrap" "{bin}/debootstrap" ;;
    esac
  done
fi
"""
DOCKERD = """#!/bin/sh
PATH=/usr/bin:/bin  # ensure_docker hands dockerd the searched path only
echo "dockerd $*" >> "{log}"
echo $$ > "{state}/dockerd.pid"
touch "{state}/engine_up"
exec sleep 60
"""
DOCKERD_BROKEN = """#!/bin/sh
echo "failed to start daemon: error initializing graphdriver: driver not supported" >&2
exit 1
"""
DEBOOTSTRAP = """#!/bin/sh
PATH=/usr/bin:/bin
echo "debootstrap $*" >> "{log}"
mkdir -p "$3/etc/apt" && echo rootfs > "$3/marker"
"""


class FakeMachine:
    def __init__(self, root: Path):
        self.root = root
        self.bin, self.stubs, self.state = root / "bin", root / "stubs", root / "state"
        for d in (self.bin, self.stubs, self.state):
            d.mkdir()
        self.log = root / "calls.log"
        self.log.touch()
        self.dockerd_log = root / "dockerd.log"
        fmt = {"log": self.log, "state": self.state, "stubs": self.stubs, "bin": self.bin}
        self.write(self.stubs / "dockerd", DOCKERD.format(**fmt))
        self.write(self.stubs / "debootstrap", DEBOOTSTRAP.format(**fmt))
        self.write(self.bin / "docker", CLIENT.format(**fmt))
        self.write(self.bin / "apt-get", APT_GET.format(**fmt))

    @staticmethod
    def write(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def calls(self, prefix: str) -> list[str]:
        return [c for c in self.log.read_text().splitlines() if c.startswith(prefix)]

    def ensure(self) -> str:
        return ensure_docker(path=str(self.bin), wait_s=10, logfile=self.dockerd_log,
                             pidfile=self.root / "docker.pid")

    def stop(self) -> None:
        pid_file = self.state / "dockerd.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def machine(tmp_path, monkeypatch):
    # root is needed to install; CI may run unprivileged, and nothing here touches the host
    monkeypatch.setattr(docker_setup, "_is_root", lambda: True)
    m = FakeMachine(tmp_path)
    yield m
    m.stop()


def test_client_without_engine_installs_docker_io_starts_it_and_builds_the_base(machine):
    version = machine.ensure()
    assert version == "20.10.24+test"
    assert machine.calls("apt-get") == ["apt-get update -qq", "apt-get install -y -qq docker.io debootstrap"]
    assert machine.calls("dockerd") == ["dockerd --storage-driver=overlay2"]
    [boot] = machine.calls("debootstrap")
    assert boot.startswith("debootstrap --variant=minbase bookworm ")
    assert "docker import - local/debian:bookworm" in machine.calls("docker")


def test_an_answering_engine_with_the_base_image_installs_and_starts_nothing(machine):
    (machine.state / "engine_up").touch()
    (machine.state / "image").touch()
    assert machine.ensure() == "20.10.24+test"
    assert machine.calls("apt-get") == [] and machine.calls("dockerd") == [] and machine.calls("debootstrap") == []


def test_a_stopped_engine_is_started_not_reinstalled(machine):
    machine.write(machine.bin / "dockerd", (machine.stubs / "dockerd").read_text())
    machine.write(machine.bin / "debootstrap", (machine.stubs / "debootstrap").read_text())
    machine.ensure()
    assert machine.calls("apt-get") == []
    assert machine.calls("dockerd") == ["dockerd --storage-driver=overlay2"]
    assert len(machine.calls("debootstrap")) == 1


def test_a_daemon_that_dies_is_reported_with_its_last_log_line(machine):
    machine.write(machine.bin / "dockerd", DOCKERD_BROKEN)
    (machine.state / "image").touch()
    with pytest.raises(UserError, match="dockerd exited with status 1: failed to start daemon: error initializing"):
        machine.ensure()


def test_client_that_exits_zero_without_a_server_version_is_no_engine(tmp_path):
    FakeMachine.write(tmp_path / "docker", "#!/bin/sh\necho ''\nexit 0\n")
    assert docker_ok(str(tmp_path))[0] is False
    assert docker_ok(str(tmp_path / "nowhere"))[1] == "the docker CLI is not installed"


def _state(**kw) -> MachineState:
    base = dict(engine_answers=False, engine_detail="Cannot connect", docker_cli="/usr/local/bin/docker",
                dockerd=None, debootstrap=None, base_image=False, root=True, apt_get="/usr/bin/apt-get")
    return MachineState(**(base | kw))


@pytest.mark.parametrize("kw, expected", [
    ({}, ["docker.io", "debootstrap"]),                                   # client only: the failing case
    ({"docker_cli": None}, ["docker.io", "debootstrap"]),                 # nothing at all
    ({"dockerd": "/usr/sbin/dockerd"}, ["debootstrap"]),                  # stopped engine
    ({"dockerd": "/usr/sbin/dockerd", "docker_cli": None}, ["docker.io", "debootstrap"]),
    ({"engine_answers": True}, ["debootstrap"]),                          # remote engine, no image yet
    ({"engine_answers": True, "base_image": True}, []),
    ({"engine_answers": True, "base_image": True, "debootstrap": None, "docker_cli": "/x/docker"}, []),
])
def test_packages_follow_from_the_engine_not_the_client(kw, expected):
    assert packages_to_install(_state(**kw)) == expected


def test_without_root_it_says_what_to_run(machine, monkeypatch):
    monkeypatch.setattr(docker_setup, "_is_root", lambda: False)
    with pytest.raises(UserError, match=r"not root with apt-get; as root run: apt-get install -y docker.io debootstrap"):
        machine.ensure()
    assert machine.calls("apt-get") == []


def test_a_stale_dockerd_pid_file_is_removed_before_the_daemon_starts(machine):
    """A machine restarted without a clean daemon stop keeps /var/run/docker.pid, and dockerd
    refuses to start over it (seen on this project's CI machine)."""
    (machine.root / "docker.pid").write_text("999999999")  # no such process
    machine.write(machine.bin / "dockerd", (machine.stubs / "dockerd").read_text())
    (machine.state / "image").touch()
    machine.ensure()
    assert machine.calls("dockerd") == ["dockerd --storage-driver=overlay2"]
    assert not (machine.root / "docker.pid").exists()


@pytest.mark.parametrize("content,removed", [("999999999", True), ("not a pid", True), ("", True),
                                             ("OTHER", True), ("THREAD", True), ("DOCKERD", False)])
def test_clear_stale_pidfile(tmp_path, content, removed):
    """Only a running dockerd keeps its pid file; on this project's CI machine the old id was a
    thread of a Spark JVM after a restart."""
    proc = tmp_path / "proc"
    for pid, name, tgid in ((100, "dockerd", 100), (200, "java", 200), (300, "dockerd", 299)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "status").write_text(f"Name:\t{name}\nUmask:\t0022\nTgid:\t{tgid}\nPid:\t{pid}\n")
    pidfile = tmp_path / "docker.pid"
    pidfile.write_text({"DOCKERD": "100", "OTHER": "200", "THREAD": "300"}.get(content, content))
    assert docker_setup.clear_stale_pidfile(pidfile, proc=proc) is removed
    assert pidfile.exists() is not removed
    assert docker_setup.clear_stale_pidfile(tmp_path / "missing.pid", proc=proc) is False
