"""Run untrusted Python (LLM-written log parsers and the like) under bubblewrap + seccomp.

An in-process audit hook is not a security boundary (Python's documentation says so, and one was
escaped through ``_posixsubprocess.fork_exec``), so untrusted code runs in a child that the kernel
confines:

- **bubblewrap**: new user, pid, network, ipc, uts and cgroup namespaces; a root file system that holds
  only the interpreter and the shared libraries, read-only (no ``/etc``, ``/home``, ``/root``,
  ``/proc``, ``/sys``, ``/tmp``, no writable path at all); uid/gid 65534; every capability dropped;
  ``no-new-privileges``; an empty environment; the child dies with its parent.
- **seccomp** (libseccomp, loaded by the trusted bootstrap before the untrusted code runs, so it cannot
  be lifted): processes (fork/clone/exec by any route), sockets, ptrace and cross-process memory,
  mounts and namespaces, rlimit changes, io_uring, bpf, keys and kernel modules fail with EPERM.
- **rlimits**: address space, CPU seconds, no file writes (FSIZE 0), few open files, no core dumps.
- **the host side**: a wall-clock limit (the whole process group is killed), stdout and stderr read
  only up to a cap (past it the child is killed), input only through stdin.

There is no fallback: without bubblewrap and libseccomp, ``run`` raises ``JailError("no_isolation")``
and the untrusted code is not run. ``make setup`` installs both (Debian: bubblewrap, libseccomp2).
"""

from __future__ import annotations

import ctypes.util
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# syscalls untrusted code never needs; names this architecture lacks are skipped
DENIED_SYSCALLS = (
    "fork", "vfork", "clone", "clone3", "execve", "execveat",
    "socket", "socketpair", "socketcall", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "setrlimit", "prlimit64", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "personality",
    "open_by_handle_at", "name_to_handle_at", "mknod", "mknodat",
)

# the trusted first part of the child: limits, then the seccomp filter, then the program (``-c``)
BOOTSTRAP = r'''
import ctypes, errno, resource, sys
_J = {jail!r}
def _limit(what, n, hard=None):
    resource.setrlimit(what, (n, n if hard is None else hard))
_limit(resource.RLIMIT_AS, _J["memory_mb"] * 2**20)
_limit(resource.RLIMIT_CPU, _J["cpu_s"], _J["cpu_s"] + 1)  # SIGXCPU at the soft limit
_limit(resource.RLIMIT_FSIZE, 0)
_limit(resource.RLIMIT_CORE, 0)
_limit(resource.RLIMIT_NOFILE, 64)
_lib = ctypes.CDLL(_J["libseccomp"], use_errno=True)
_lib.seccomp_init.restype = ctypes.c_void_p
_lib.seccomp_init.argtypes = [ctypes.c_uint32]
_lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
_lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
_lib.seccomp_load.argtypes = [ctypes.c_void_p]
_ctx = _lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW for what is not denied
if not _ctx:
    sys.exit("jail: seccomp_init failed")
for _name in _J["denied"]:
    _nr = _lib.seccomp_syscall_resolve_name(_name.encode())
    if _nr == -1:  # __NR_SCMP_ERROR: not a syscall of this architecture
        continue
    if _lib.seccomp_rule_add(_ctx, 0x00050000 | errno.EPERM, _nr, 0) < 0:  # SCMP_ACT_ERRNO(EPERM)
        sys.exit(f"jail: seccomp rule for {{_name}} failed")
if _lib.seccomp_load(_ctx) != 0:  # also sets no_new_privs
    sys.exit("jail: seccomp_load failed")
del ctypes, _lib, _ctx, _J, _limit
'''


class JailError(Exception):
    """kind: no_isolation, timeout, output_limit, crash, memory_limit, cpu_limit."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # wall clock, host side
    memory_mb: int = 512  # address space
    output_mb: int = 64  # stdout; stderr keeps its last 64 KiB
    cpu_s: int | None = None  # default: the wall-clock limit rounded up, plus one


@dataclass
class JailResult:
    stdout: bytes
    stderr: str
    returncode: int
    seconds: float


def _libseccomp() -> str | None:
    return ctypes.util.find_library("seccomp")


def packages_to_install(has_bwrap: bool, has_libseccomp: bool) -> list[str]:
    """The Debian packages that give this machine the jail (the decision ``setup`` acts on)."""
    return [pkg for pkg, have in (("bubblewrap", has_bwrap), ("libseccomp2", has_libseccomp)) if not have]


def setup(log=print) -> int:
    """Install what the jail needs (as root, with apt-get), then probe it; 0 when it works.

    Stdlib only, so ``make setup`` runs it with the system Python before the virtualenv exists."""
    missing = packages_to_install(shutil.which("bwrap") is not None, _libseccomp() is not None)
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            log(f"warning: the jail for untrusted code needs {' '.join(missing)} (install as root); "
                "LLM-written parsers will not run until then")
            return 1
        log(f"installing {' '.join(missing)} (the jail for untrusted code)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=subprocess.DEVNULL)
        unavailable.cache_clear()
    why = unavailable()
    if why:
        log(f"warning: {why}")
        return 1
    return 0


@functools.cache
def unavailable() -> str:
    """Why untrusted code cannot be run here ('' when it can): the probe runs a real jailed child."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: `make setup` installs it (Debian package bubblewrap)"
    if _libseccomp() is None:
        return "libseccomp is not installed (Debian package libseccomp2)"
    try:
        res = _spawn("import os; print(os.getuid())", b"", Limits(timeout_s=30, memory_mb=256))
    except JailError as err:
        return f"bubblewrap cannot start a sandbox here: {err.message}"
    if res.returncode != 0 or res.stdout.strip() != b"65534":
        return f"bubblewrap cannot start a sandbox here: {res.stderr.strip()[-300:] or res.returncode}"
    return ""


def _interpreter() -> Path:
    return Path(os.path.realpath(sys.executable))


def _mounts() -> list[str]:
    """Read-only binds of the interpreter and what it links against; nothing else of the host."""
    args: list[str] = []
    seen: set[str] = set()

    def bind(path: str) -> None:
        if path in seen or not os.path.lexists(path):
            return
        seen.add(path)
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            args.extend(["--symlink", os.readlink(path), path])
        else:
            args.extend(["--ro-bind", path, path])

    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32"):
        bind(path)
    prefix = os.path.realpath(sys.base_prefix)
    if prefix.startswith("/usr"):  # a distribution's Python: its binary and its stdlib only
        bind(str(_interpreter()))
        bind(os.path.join(prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}"))
    else:
        bind(prefix)
    for dev in ("/dev/null", "/dev/urandom"):
        args.extend(["--ro-bind", dev, dev])
    return args


def _command(program: str, limits: Limits) -> list[str]:
    cpu = limits.cpu_s or int(limits.timeout_s + 0.999) + 1
    boot = BOOTSTRAP.format(jail={"memory_mb": limits.memory_mb, "cpu_s": cpu, "libseccomp": _libseccomp(),
                                  "denied": list(DENIED_SYSCALLS)})
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", "65534", "--gid", "65534", "--hostname", "jail", "--clearenv",
            "--setenv", "LC_ALL", "C.UTF-8", *_mounts(), "--remount-ro", "/", "--chdir", "/",
            "--", str(_interpreter()), "-I", "-S", "-B", "-c", boot + "\n" + program]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _spawn(program: str, stdin: bytes, limits: Limits) -> JailResult:
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(_command(program, limits), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"}, cwd="/",
                                start_new_session=True)
    except OSError as err:
        raise JailError("no_isolation", f"bwrap did not start: {err}") from None
    cap = limits.output_mb * 2**20
    out, err_tail, over = bytearray(), bytearray(), threading.Event()

    def feed():
        try:
            proc.stdin.write(stdin)
        except OSError:  # the child exited or closed stdin early
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def read_out():
        while chunk := proc.stdout.read(1 << 16):
            if len(out) + len(chunk) > cap:
                over.set()
                _kill(proc)
                return
            out.extend(chunk)

    def read_err():
        while chunk := proc.stderr.read(1 << 16):
            err_tail.extend(chunk)
            del err_tail[:-65536]

    threads = [threading.Thread(target=f, daemon=True) for f in (feed, read_out, read_err)]
    for th in threads:
        th.start()
    try:
        rc = proc.wait(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
        raise JailError("timeout", f"no result within {limits.timeout_s:.0f}s (a loop?)") from None
    finally:
        for th in threads:
            th.join(timeout=5)
    if over.is_set():
        raise JailError("output_limit", f"printed more than {limits.output_mb} MB")
    return JailResult(bytes(out), err_tail.decode("utf-8", "replace"), rc, time.monotonic() - t0)


def run(program: str, stdin: bytes = b"", limits: Limits | None = None) -> JailResult:
    """Run trusted ``program`` source (which may exec untrusted code) jailed; ``stdin`` is its only input.

    Raises JailError for no isolation, the wall-clock limit or the output cap; a crash or a limit the
    kernel enforced inside is the result's non-zero returncode (SIGXCPU: CPU limit, MemoryError: memory)."""
    why = unavailable()
    if why:
        raise JailError("no_isolation", why + " (untrusted code is never run without it)")
    return _spawn(program, stdin, limits or Limits())


if __name__ == "__main__":
    if sys.argv[1:] != ["setup"]:
        sys.exit("usage: python -m core.jail setup   (install and probe the jail for untrusted code)")
    sys.exit(setup())
