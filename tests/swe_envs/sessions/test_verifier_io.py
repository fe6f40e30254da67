"""A warm verifier's task in on stdin and results out on stdout (``swe_envs.sessions.verifier_io``), on a
real engine: the same results as the archive path it replaces, that path still taken where the image
cannot unpack a task (no ``base64``), a run past its time limit reported as such, and the protocol's
parser on the bytes BOOT prints."""

from __future__ import annotations

import base64
import io
import tarfile
import time

import pytest

from swe_envs.sessions.verifier_io import BEGIN, END, _parse, task_tar

CMD = "echo hello from $(id -u); printf 'caf\\303\\251 \\377\\n'; ls /tmp/swe-task /task 2>&1; exit 3"


def test_results_parse_from_what_boot_prints():
    log = "line one\ncafé\n".encode()
    out = (b"noise before\n" + BEGIN + b"\nrun-1.log " + base64.b64encode(log) + b"\nrun-1.rc "
           + base64.b64encode(b"3\n") + b"\napply.log \nrc 0\n" + END + b"\n")
    files, rc = _parse(out)
    assert files == {"run-1.log": "line one\ncafé\n", "run-1.rc": "3\n", "apply.log": ""} and rc == 0


def test_the_task_tar_holds_the_files_under_its_prefix_ready_last():
    files = {"run.sh": "a", "test.sh": "b", "patches/00-model.diff": "c", "ready": ""}
    for prefix in ("", "task/"):
        with tarfile.open(fileobj=io.BytesIO(task_tar(files, prefix))) as tar:
            names = [m.name for m in tar.getmembers() if m.isfile()]
            assert names == [prefix + n for n in files] and all(m.mode & 0o044 for m in tar.getmembers())


def _verifiers():
    from swe_envs.config import SandboxConfig
    from swe_envs.docker_setup import docker_client
    from swe_envs.sessions.warm import Verifiers

    return docker_client(), Verifiers(docker_client(), SandboxConfig(), log=lambda m: None)


def _ready(v, image: str, cmd: str) -> None:
    v.prime(image, "none", cmd)
    t0 = time.monotonic()
    while not v.ready.get((image, "none", cmd)):
        assert time.monotonic() - t0 < 120
        time.sleep(0.2)


@pytest.mark.docker
def test_stdin_path_and_archive_fallback_give_the_same_results():
    """On the base image the task goes in on stdin (to /tmp/swe-task); on the same image without
    base64 BOOT asks for files and the archive path serves (/task). Both: the run's exit code, its log
    (non-UTF-8 bytes replaced alike), a patch that does not apply (the base image has neither git nor
    patch) reported with the run script's reason."""
    import docker.models.containers as dc

    from swe_envs.docker_setup import ensure_docker
    from tests.swe_envs.terminal.tiny_tasks import BASE

    ensure_docker(BASE)
    client, v = _verifiers()
    tag = "swe-envs-test/no-base64:1"
    client.images.build(fileobj=io.BytesIO(f"FROM {BASE}\nRUN rm -f /usr/bin/base64\n".encode()), tag=tag,
                        network_mode="none", rm=True)
    patch = "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+patched\n"
    cmd = CMD
    calls = []
    orig = dc.Container.put_archive
    dc.Container.put_archive = lambda self, *a, **k: calls.append(self.id) or orig(self, *a, **k)
    try:
        results = {}
        for image in (BASE, tag):
            _ready(v, image, cmd)
            res = v.run(image, cmd, [])
            assert not res.error and not res.patch_failed and res.runs[0].rc == 3, res
            results[image] = res.runs[0].log
            _ready(v, image, cmd)
            res = v.run(image, cmd, [("model", patch)])
            assert not res.error and not res.runs and "00-model.diff: " in res.patch_failed, res
            assert "git: not found" in res.patch_failed and "patch: not found" in res.patch_failed
        assert len(calls) == 2  # only the image without base64 took the archive path
    finally:
        dc.Container.put_archive = orig
        v.shutdown()
        client.images.remove(tag, force=True)
    stdin_log, files_log = results[BASE], results[tag]
    assert "hello from 10001" in stdin_log and "café \ufffd" in stdin_log
    assert "/tmp/swe-task:" in stdin_log and "run.sh" in stdin_log  # the stdin path's task directory
    assert "/task:" in files_log and "ready" in files_log  # the archive path's
    assert stdin_log.splitlines()[:2] == files_log.splitlines()[:2]  # the lines before the listing


@pytest.mark.docker
def test_a_run_past_its_time_limit_is_reported_as_timed_out():
    from swe_envs.docker_setup import ensure_docker
    from tests.swe_envs.terminal.tiny_tasks import BASE

    ensure_docker(BASE)
    _, v = _verifiers()
    cmd = "echo started; sleep 60"
    try:
        _ready(v, BASE, cmd)
        t0 = time.monotonic()
        res = v.run(BASE, cmd, [], timeout_s=2)
        assert time.monotonic() - t0 < 30
        assert not res.error and res.runs and res.runs[0].timed_out and "started" in res.runs[0].log, res
    finally:
        v.shutdown()


@pytest.mark.docker
def test_a_log_of_megabytes_comes_back_whole_on_the_stdin_path():
    """Many MB arrive in many chunks: all of it is read, and the end marker is searched in the new bytes only."""
    from swe_envs.docker_setup import ensure_docker
    from tests.swe_envs.terminal.tiny_tasks import BASE

    ensure_docker(BASE)
    _, v = _verifiers()
    cmd = "seq 1 1000000; echo done"  # 6.9 MB
    try:
        _ready(v, BASE, cmd)
        t0 = time.monotonic()
        res = v.run(BASE, cmd, [])
        assert time.monotonic() - t0 < 60
        log = res.runs[0].log
        assert not res.error and res.runs[0].rc == 0 and not res.runs[0].output_limited, res.error
        assert log.startswith("1\n2\n") and log.endswith("999999\n1000000\ndone\n") and log.count("\n") == 1_000_001
    finally:
        v.shutdown()
