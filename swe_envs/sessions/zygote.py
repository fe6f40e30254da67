"""A warm verifier container's boot script and its pytest zygote.

A verifier container is started ahead of need (``swe_envs.sessions.warm``). Its main process, ``BOOT``,
waits for the verify's task (patches, ``test.sh``, the sandbox's ``run.sh``) on its stdin
(``swe_envs.sessions.verifier_io``; or copied to ``/task`` where the image cannot unpack it) and
then runs ``run.sh`` exactly as a sandbox container does: the patches, then the test command under its
timeout, the log capped, the container exiting when it is done.

Where the test command is ``[VAR=value ...] python -m pytest ARGS`` (the pytest plans of the
environments), the wait is not idle: a zygote, started by the same shell words (so the same
environment and the same ARGS), imports pytest and the plugins pytest loads on every run — only
when they come from outside /testbed, i.e. not the code under test — and then blocks. ``test.sh``
hands it the run: the zygote runs pytest's ``__main__`` with those ARGS, its output going to
``test.sh``'s own (so the timeout and the log cap of ``run.sh`` hold as they do for the command
itself), and ``test.sh`` exits with pytest's code. On a loaded host pytest's imports were half of a
verify's test run (6.4 of 12.2 s on the calc instance at load ~30). Nothing of the agent's or the
model's is loaded before the patches are applied: /testbed's modules, conftest.py files and the
configuration are read by pytest after ``test.sh`` starts it. Where the zygote cannot start (no
python, pytest under /testbed, an import error), ``test.sh`` runs the command itself.
"""

from __future__ import annotations

import re

from swe_envs.sessions.verifier_io import EMIT, FILES, TASK_DIR

Z = "/tmp/swe-zygote"
# the task comes on stdin (``verifier_io``: a tar unpacked into TASK_DIR, the results printed back),
# or, where the image has no tar/base64, is copied to /task by the host after BOOT says FILES
BOOT = (f'if [ -n "$SWE_ZYGOTE" ]; then (cd /testbed 2>/dev/null; sh -c "$SWE_ZYGOTE" </dev/null >{Z}.log 2>&1; '
        f'touch {Z}.failed) & fi\n'
        "unset SWE_ZYGOTE SWE_ZYGOTE_PY\n"
        f"T={TASK_DIR}\n"
        "IFS= read -r hello\n"  # the host's first line: what BOOT prints from here on reaches it
        'if command -v tar >/dev/null 2>&1 && command -v base64 >/dev/null 2>&1 && mkdir -p "$T" && '
        'tar -x -C "$T" -f - 2>/dev/null && [ -e "$T/ready" ]; then\n'
        '  sh "$T/run.sh" </dev/null >/dev/null 2>&1; rc=$?\n'
        f"{EMIT}"
        '  exit "$rc"\n'
        "fi\n"
        f"echo {FILES.decode()}\n"
        "while [ ! -e /task/ready ]; do sleep 0.1; done\n"
        "exec sh /task/run.sh </dev/null\n")

ZYGOTE_PY = f"""
import importlib.util, os, runpy, sys
Z = {Z!r}
for k in ("SWE_ZYGOTE", "SWE_ZYGOTE_PY"):
    os.environ.pop(k, None)
args = sys.argv[1:]
def outside(name):  # importable, and not from the tree under test
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return False
    origin = getattr(spec, "origin", None) or ""
    return bool(origin) and not os.path.realpath(origin).startswith("/testbed/")
if not (outside("pytest") and outside("_pytest")):
    sys.exit(3)
import pytest
from _pytest.config import default_plugins
for name in default_plugins:
    try:
        __import__("_pytest." + name)
    except Exception:
        pass
os.mkfifo(Z + ".go")
os.mkfifo(Z + ".out")
open(Z + ".ready", "w").close()
with open(Z + ".go") as go:
    go.read()
fd = os.open(Z + ".out", os.O_WRONLY)
os.dup2(fd, 1)
os.dup2(fd, 2)
sys.path[0] = os.getcwd()  # as python -m sets it
sys.argv = ["pytest", *args]
code = 1
try:
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
except BaseException:
    import traceback
    traceback.print_exc()
sys.stdout.flush()
sys.stderr.flush()
with open(Z + ".rc", "w") as f:
    f.write(str(code))
os._exit(code)
"""

_PYTEST = re.compile(r"((?:[A-Za-z_]\w*=\S*\s+)*)python -m pytest((?:\s.*)?)", re.S)


def zygote_launch(command: str) -> str | None:
    """The shell words that start the zygote for ``command``, or None when it is not a plain pytest run."""
    m = _PYTEST.fullmatch(command.strip())
    if not m or "\n" in command or ";" in command or "&&" in command or "|" in command:
        return None
    return f"{m.group(1)}exec python -c 'import os; exec(os.environ[\"SWE_ZYGOTE_PY\"])'{m.group(2)}"


def test_sh(command: str) -> str:
    """``test.sh`` of a zygote container: hand the run to the zygote when it is ready, else run ``command``."""
    return (f"while [ ! -e {Z}.ready ] && [ ! -e {Z}.failed ]; do sleep 0.05; done\n"
            f"if [ -e {Z}.ready ]; then\n"
            f"  echo go > {Z}.go\n"
            f"  cat {Z}.out\n"
            f'  exit "$(cat {Z}.rc 2>/dev/null || echo 1)"\n'
            "fi\n"
            f"{command}\n")
