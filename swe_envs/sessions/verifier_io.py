"""A warm verifier's task in and results out over one attach connection, not Docker's archive API.

Measured on this host's engine (2026-12-02, load ~1): ``put_archive`` and ``get_archive`` on a
running container took 110-135 ms each (the engine mounts the container's file system for each),
about 0.25 s of a 0.8 s verify; writing the same tar to the container's stdin over an attach
connection took ~10 ms, and the results come back on the same connection as the run ends, without
waiting for the container's exit to be processed (another ~0.15 s).

The protocol, with ``BOOT`` (``swe_envs.sessions.zygote``) on the other side:

- the host attaches (stdin + stdout) and writes a first line, then the task as a tar (``run.sh``,
  ``test.sh``, ``patches/``, ``ready``);
- ``BOOT`` extracts it into ``TASK_DIR``, runs ``run.sh`` (the sandbox's own script, formatted for
  that directory), then prints every file of ``/tmp/swe-out`` base64-encoded between the markers,
  and the run script's exit code;
- an image without ``tar`` or ``base64`` makes ``BOOT`` print ``FILES`` and wait for ``/task`` as
  before: the host then copies the task in with ``put_archive`` and reads the results with
  ``get_archive`` (``exchange`` raises ``Fallback`` and the caller takes that path).

A stream that ends short of the end marker (the container killed at its memory or disk limit) is a
``Fallback`` too: the archive path reads what the container left, so a result is never made up
from a partial stream. A failed attach is an error of the verify (BOOT still waits on stdin).
"""

from __future__ import annotations

import base64
import io
import socket
import struct
import tarfile
import time

TASK_DIR = "/tmp/swe-task"
# the first line on stdin: BOOT answers only once it is read, so its answer comes after the attach
# (output from before an attach is not sent on it)
HELLO = b"SWE-VERIFIER-TASK"
FILES = b"SWE-VERIFIER-FILES"  # BOOT cannot unpack a task from stdin: copy it in
BEGIN, END = b"SWE-VERIFIER-RESULTS-BEGIN", b"SWE-VERIFIER-RESULTS-END"

# BOOT's side, after run.sh: each file of /tmp/swe-out as "NAME BASE64" on one line, then "rc N"
EMIT = (f"echo {BEGIN.decode()}\n"
        "for f in /tmp/swe-out/*; do [ -f \"$f\" ] || continue; "
        "printf '%s ' \"${f##*/}\"; base64 <\"$f\" | tr -d '\\n'; echo; done\n"
        "echo \"rc $rc\"\n"
        f"echo {END.decode()}\n")


class Fallback(Exception):
    """The attach path cannot serve this verify: the archive path must."""


def task_tar(files: dict[str, str], prefix: str = "") -> bytes:
    """``files`` (relative name -> text, ``ready`` last) as a tar readable by the test user, each
    name under ``prefix`` (``task/`` for ``put_archive`` at /, nothing for the stdin path)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = {prefix.rstrip("/")} if prefix else set()
        dirs |= {prefix + n.rsplit("/", 1)[0] for n in files if "/" in n}
        for name in sorted(d for d in dirs if d):
            d = tarfile.TarInfo(name)
            d.type, d.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(d)
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(prefix + name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def exchange(container, tar: bytes, timeout_s: float, max_bytes: int) -> tuple[dict[str, str], int]:
    """Send the task on the container's stdin and read its results: (files of /tmp/swe-out, run.sh's
    exit code). Raises ``Fallback`` where the archive path must serve (BOOT said so, the stream
    ended short), ``TimeoutError``/``OSError`` past ``timeout_s`` or where the transport fails."""
    try:
        resp = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
    except Exception as err:  # nothing sent: BOOT still waits on stdin, so no archive path either
        raise OSError(f"attach: {type(err).__name__}: {err}") from err
    # unix/tcp engines give a SocketIO around the socket; https an SSL socket; ssh a paramiko channel
    inner = getattr(resp, "_sock", None)
    sock = inner if isinstance(inner, socket.socket) else resp
    if not all(hasattr(sock, m) for m in ("sendall", "recv", "settimeout")):
        _close(resp)  # BOOT waits on stdin: nothing was sent, so the archive path cannot serve either
        raise OSError("the engine's attach transport cannot be written")
    try:
        sock.settimeout(timeout_s)
        sock.sendall(HELLO + b"\n" + tar)
        # no half-close: the engine ends the whole attach stream on it (stdout included), and tar
        # stops at the end-of-archive blocks inside the tar anyway
        out = _read_until_end(sock, max_bytes, time.monotonic() + timeout_s)
    finally:
        _close(resp)
    return _parse(out)


def _read_until_end(sock: socket.socket, max_bytes: int, deadline: float) -> bytes:
    """The container's stdout (frames of Docker's multiplexed stream) up to the end marker."""
    out, pending, seen = bytearray(), b"", 0  # seen: how far ``out`` was searched for the end marker
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("the verifier did not finish in time")
        chunk = sock.recv(1 << 16)  # the socket's timeout bounds a silent run
        if not chunk:
            raise Fallback("the verifier's output ended before its results")
        pending += chunk
        while len(pending) >= 8:
            kind, n = struct.unpack(">BxxxL", pending[:8])
            if len(pending) < 8 + n:
                break
            if kind == 1:  # stdout; stderr is not attached
                out += pending[8:8 + n]
            pending = pending[8 + n:]
        if FILES in out[:4096]:  # BOOT's first words, when it says them
            raise Fallback("the image cannot unpack a task from stdin")
        if len(out) > max_bytes:
            raise Fallback("the verifier's output is over its cap")
        # only the new bytes (and a marker's length before them): a log of many MB arrives in many chunks
        if out.find(END + b"\n", max(0, seen - len(END) - 1)) >= 0:
            return bytes(out)
        seen = len(out)


def _parse(out: bytes) -> tuple[dict[str, str], int]:
    body = out[out.index(BEGIN) + len(BEGIN):out.index(END)]
    files, rc = {}, -1
    for line in body.split(b"\n"):
        if line.startswith(b"rc "):
            value = line[3:].strip()
            rc = int(value) if value.lstrip(b"-").isdigit() else -1
        elif b" " in line:  # "NAME BASE64" (an empty file: "NAME ")
            name, data = line.split(b" ", 1)
            files[name.decode("utf-8", "replace")] = base64.b64decode(data).decode("utf-8", "replace")
    return files, rc


def _close(resp) -> None:
    try:
        resp.close()
    except Exception:
        pass
