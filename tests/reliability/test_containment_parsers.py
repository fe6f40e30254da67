"""Hostile LLM-written log parsers, run exactly as `make-parser` and `validate --runner file:` run them.

Each candidate is a real `parse(log)` that tries one escape and reports what it got in its result;
the host checks from outside too (a loopback listener got no connection, a host secret is absent, no
file appeared, the host's free disk did not drop, the test process is alive). An attempt is contained
when neither the parser's own result nor the host shows an effect; the reason the jail gave (the
parser's error, or the refused call) goes into `make chaos`'s table."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from swe_envs.config import LLMParserConfig
from swe_envs.envs.parsers.llm import ParserRunError, run_parser_file, run_parser_full
from tests.reliability.ledger import LEDGER, LONG
from tests.reliability.test_containment import Listener

AREA = "containment: LLM-written parsers"
LOG = "test_a PASSED\ntest_b FAILED\n== 1 passed, 1 failed ==\n"

# the body runs inside parse(); `got` is what it managed (an escape when non-empty)
WRAP = '''
def parse(log):
    got = []
    try:
{body}
    except BaseException as err:
        return {{"tests": {{"refused": "error"}}, "summary": {{"why": type(err).__name__ + ": " + str(err)}}}}
    return {{"tests": {{"got:" + str(g)[:200]: "passed" for g in got}}, "summary": None}}
'''


def candidate(body: str) -> str:
    return WRAP.format(body="\n".join("        " + line for line in body.strip("\n").splitlines()))


def attempt(name: str, body: str, timeout_s: float = 5.0, memory_mb: int = 256) -> tuple[bool, str, dict]:
    """(contained by the parser's own report, reason, statuses)."""
    try:
        statuses, summary = run_parser_full(candidate(body), LOG, timeout_s, memory_mb)
    except ParserRunError as err:
        return True, f"{err.kind}: {err.message}", {}
    if "refused" in statuses:
        return True, f"refused: {summary}" if not isinstance(summary, dict) else "refused", statuses
    escaped = [k for k in statuses if k.startswith("got:")]
    return not escaped, ("no effect" if not escaped else f"ESCAPED: {escaped[:3]}"), statuses


EXE = os.path.realpath(sys.executable)  # bound in the jail: only seccomp stands between it and exec


SPAWN_ROUTES = {
    "subprocess.run": f"import subprocess\ngot.append(subprocess.run([{EXE!r}, '-c', 'print(1)']).returncode)",
    "os.system": "import os\nrc = os.system('true')\nif rc == 0: got.append(rc)",
    "os.fork": "import os\npid = os.fork()\nif pid == 0: os._exit(0)\ngot.append(pid)",
    "_posixsubprocess.fork_exec": (
        "import _posixsubprocess, os\n"
        f"args = [{EXE!r}, '-c', 'pass']\n"
        "pid = _posixsubprocess.fork_exec(args, [os.fsencode(args[0])], True, (), None, None, -1, -1, -1, -1, -1,"
        " -1, *os.pipe(), False, False, -1, None, None, None, -1, None, False)\n"
        "got.append(pid)"),
    "os.posix_spawn": f"import os\ngot.append(os.posix_spawn({EXE!r}, [{EXE!r}, '-c', 'pass'], {{}}))",
    "os.execv": f"import os\nos.execv({EXE!r}, [{EXE!r}, '-c', 'print(1)'])",
    "ctypes fork syscall": ("import ctypes, os, platform\n"
                            "nr = {'x86_64': 57, 'aarch64': 220}[platform.machine()]  # fork / clone\n"
                            "pid = ctypes.CDLL(None, use_errno=True).syscall(nr, 17, 0, 0, 0, 0)\n"
                            "if pid == 0: os._exit(0)\n"
                            "if pid > 0: got.append(pid)"),
    "threading": "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\ngot.append('thread')",
    "multiprocessing": "import multiprocessing\np = multiprocessing.Process(target=print)\np.start()\ngot.append(p.pid)",
    "pty.spawn": f"import pty\ngot.append(pty.spawn([{EXE!r}, '-c', 'pass']))",
}


def unjailed(body: str) -> tuple[list[str], str]:
    """(what the attack got, stdout) in a plain child process: the control that shows an attack works,
    so a contained one was stopped by the jail, not by a typo in the attack."""
    import json
    import subprocess

    prog = candidate(body) + "\nimport json\nprint(json.dumps(parse('')))\n"
    out = subprocess.run([EXE, "-c", prog], capture_output=True, text=True, timeout=60).stdout
    try:
        tests = json.loads(out.strip().splitlines()[-1])["tests"]
    except (ValueError, IndexError, KeyError, TypeError):
        return [], out
    return [k for k in tests if k.startswith("got:")], out


@pytest.mark.parametrize("route", sorted(SPAWN_ROUTES))
def test_each_spawn_route_starts_a_process_without_the_jail(route):
    got, out = unjailed(SPAWN_ROUTES[route])
    if route == "os.execv":  # the process became the exec'd one: its output, no result
        assert out.strip() == "1", out
    else:
        assert got, out


def test_the_socket_and_file_attacks_work_without_the_jail(tmp_path):
    listener = Listener()
    try:
        got, _ = unjailed(f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
                          "got.append('connected')")
    finally:
        listener.close()
    secret = tmp_path / "s.txt"
    secret.write_text("visible")
    got_file, _ = unjailed(f"got.append(open({str(secret)!r}).read())")
    assert got and listener.hits == 1 and got_file == ["got:visible"]


@pytest.mark.area(AREA)
@pytest.mark.parametrize("route", sorted(SPAWN_ROUTES))
def test_no_process_can_be_started_by_any_route(route):
    contained, reason, _ = attempt(route, SPAWN_ROUTES[route])
    LEDGER.attempt(AREA, f"spawn: {route}", contained, reason)
    assert contained, reason


@pytest.mark.area(AREA)
def test_host_files_and_directories_are_not_visible(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(f"host secret {uuid.uuid4().hex}\n")
    names = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
    body = (f"for p in ['/etc/hostname', '/etc/passwd', '/etc/shadow', {str(secret)!r}, '/proc/1/environ',"
            " '/root/.npmrc', '/root/.cargo/credentials', '/var/run/docker.sock', '/run/docker.sock']:\n"
            "    try:\n"
            "        got.append(p + ' ' + open(p).read(60))\n"
            "    except OSError:\n"
            "        pass\n"
            "import os\n"
            "for d in ['/root', '/home', '/etc', '/tmp', '/proc', '/sys', '/var']:\n"
            "    try:\n"
            "        got += [d + '/' + n for n in os.listdir(d) if n != '.pyenv']\n"
            "    except OSError:\n"
            "        pass")
    contained, reason, statuses = attempt("read host files", body)
    leaked = [k for k in statuses if secret.read_text().strip() in k or any(f"/root/{n}" in k for n in names)]
    LEDGER.attempt(AREA, "read host files, list /root /etc /home /proc", contained and not leaked, reason)
    assert contained and not leaked, (reason, leaked)


@pytest.mark.area(AREA)
def test_the_hosts_environment_and_credentials_do_not_enter(monkeypatch):
    token = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", token)
    monkeypatch.setenv("GLM5_TEST_SECRET", token)
    contained, reason, statuses = attempt("environment", "import os\ngot += [k + '=' + v for k, v in os.environ.items()"
                                          " if k not in ('LC_ALL', 'PWD')]")
    leaked = [k for k in statuses if token in k]
    LEDGER.attempt(AREA, "read the host's environment (a secret set in it)", contained and not leaked, reason)
    assert contained and not leaked, statuses


@pytest.mark.area(AREA)
def test_no_socket_reaches_a_loopback_listener():
    listener = Listener()
    try:
        body = (f"import socket\ns = socket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
                "got.append('connected')")
        contained, reason, _ = attempt("loopback socket", body)
        raw = ("import ctypes\nfd = ctypes.CDLL(None, use_errno=True).socket(2, 1, 0)\n"
               "if fd >= 0: got.append(fd)")
        contained_raw, reason_raw, _ = attempt("raw socket", raw)
    finally:
        listener.close()
    LEDGER.attempt(AREA, "connect to a listener on the host's loopback", contained and listener.hits == 0, reason)
    LEDGER.attempt(AREA, "socket() through ctypes", contained_raw, reason_raw)
    assert contained and contained_raw and listener.hits == 0, (reason, reason_raw, listener.hits)


@pytest.mark.area(AREA)
def test_proc_self_mem_ptrace_and_signals_to_the_host(tmp_path):
    body = ("import os, ctypes\n"
            "try:\n"
            "    f = open('/proc/self/mem', 'r+b'); got.append('mem')\n"
            "except OSError:\n"
            "    pass\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "if libc.ptrace(16, 1, 0, 0) == 0: got.append('ptrace attach pid 1')  # PTRACE_ATTACH\n"
            f"for pid in (1, {os.getpid()}, os.getppid()):\n"
            "    try:\n"
            "        os.kill(pid, 0); got.append(f'sees pid {pid}') if pid == " + str(os.getpid()) + " else None\n"
            "    except OSError:\n"
            "        pass")
    contained, reason, _ = attempt("proc/ptrace/signals", body)
    LEDGER.attempt(AREA, "/proc/self/mem, ptrace, signals to host pids", contained, reason)
    assert contained, reason


@pytest.mark.area(AREA)
def test_filling_the_disk_writes_nothing(tmp_path):
    before = shutil.disk_usage("/").free
    body = ("for d in ['/', '/tmp', '/dev/shm', '/dev', " + repr(str(tmp_path)) + "]:\n"
            "    try:\n"
            "        with open(d.rstrip('/') + '/fill', 'wb') as f:\n"
            "            for _ in range(256):\n"
            "                f.write(b'x' * 2**22)\n"
            "        got.append(d)\n"
            "    except OSError:\n"
            "        pass")
    contained, reason, _ = attempt("fill disk", body, timeout_s=10)
    grew = before - shutil.disk_usage("/").free > 512 * 2**20
    LEDGER.attempt(AREA, "fill the disk", contained and not grew and not (tmp_path / "fill").exists(), reason)
    assert contained and not grew and not (tmp_path / "fill").exists(), reason


BOMBS = {
    "fork bomb": ("import os\nwhile True:\n    os.fork()", ("crash",)),
    "allocate without bound": ("x = []\nwhile True:\n    x.append(bytearray(2**24))", ("memory_limit", "crash")),
    "loop forever": ("while True:\n    pass", ("timeout", "cpu_limit")),
    "print gigabytes": ("import sys\nwhile True:\n    sys.stdout.write('x' * 2**20)", ("output_limit", "timeout")),
    "sleep past the limit": ("import time\ntime.sleep(3600)", ("timeout",)),
}


@pytest.mark.area(AREA)
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bombs_end_at_their_limit_with_a_reason(name):
    """A bomb is not caught by the candidate (no try): the jail stops it and says which limit."""
    body, kinds = BOMBS[name]
    code = "def parse(log):\n" + "\n".join("    " + line for line in body.splitlines())
    try:
        run_parser_full(code, LOG, timeout_s=3, memory_mb=256)
        contained, reason = False, "returned normally"
    except ParserRunError as err:
        contained, reason = err.kind in kinds, f"{err.kind}: {err.message}"
    LEDGER.attempt(AREA, name, contained, reason)
    assert contained, reason


@pytest.mark.area(AREA)
def test_a_saved_parser_file_runs_jailed_like_a_candidate(tmp_path):
    """`validate --runner file:PATH` and `make-parser` share the path: a saved hostile parser is refused too."""
    path = tmp_path / "parser.py"
    path.write_text(candidate(SPAWN_ROUTES["_posixsubprocess.fork_exec"]))
    res = run_parser_file(path, LOG, LLMParserConfig(timeout_s=5, memory_mb=256))
    contained = "refused" in res.statuses and not any(k.startswith("got:") for k in res.statuses)
    LEDGER.attempt(AREA, "a saved parser file (--runner file:)", contained, "refused" if contained else str(res.statuses))
    assert contained, res.statuses


@pytest.mark.skipif(not LONG, reason="the long run (`make chaos`) repeats every route many times")
@pytest.mark.area(AREA)
def test_every_route_many_times():
    for i in range(20):
        for route, body in sorted(SPAWN_ROUTES.items()):
            contained, reason, _ = attempt(route, body)
            LEDGER.attempt(AREA, f"spawn: {route} (repeat {i})", contained, reason)
            assert contained, reason


def test_an_honest_parser_still_works():
    """The jail keeps what a parser needs: the stdlib's re/json, its input, its output."""
    code = ("import re\ndef parse(log):\n    t = {m[0]: m[1].lower() for m in re.findall(r'(test_\\w+) (PASSED|FAILED)', log)}\n"
            "    return {'tests': t, 'summary': True}")
    statuses, summary = run_parser_full(code, LOG)
    assert statuses == {"test_a": "passed", "test_b": "failed"} and summary is True
    assert Path(os.path.realpath(sys.executable)).exists()
