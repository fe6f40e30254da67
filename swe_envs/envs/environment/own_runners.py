"""A repository's own test runner, for a tree pytest cannot collect.

Some suites were never meant for pytest: sympy's ``bin/test`` (its own collector and reporter),
Django's ``tests/runtests.py`` (settings and app labels), a ``runtests.py`` at the root, a tox
``[testenv]`` or a Makefile ``test`` target. When the collect check finds no test under pytest,
the builder switches the environment to the first of these the tree ships (``find``), records
the choice in the spec (``Environment.own_runner``) and in the image's labels, and every run
of that environment uses it; a run of chosen test files passes them the runner's own way.
"""

from __future__ import annotations

import configparser
import re
import shlex

from swe_envs.envs.languages import TestPlan
from swe_envs.repos import Snapshot

LABEL = "swe_envs.own_runner"  # image label: the verified environment's runner kind


def _q(items: list[str]) -> str:
    return " ".join(shlex.quote(i) for i in items)


def _py_files(selected: list[str]) -> list[str]:
    return [p for p in selected if p.endswith(".py") and p.rsplit("/", 1)[-1] != "conftest.py"]


def _bin_test(snap: Snapshot, selected: list[str]) -> TestPlan:
    text = snap.read("bin/test") or ""
    # verbose: one line per test with its own id; -C: no cache shared between runs (when it has one)
    opts = ["--verbose"] + (["-C"] if "--no-cache" in text else [])
    return TestPlan(f"python bin/test {' '.join(opts)} {_q(_py_files(selected))}".strip(), "sympy")


def _django(snap: Snapshot, selected: list[str]) -> TestPlan:
    text = snap.read("tests/runtests.py") or ""
    # a test file is an app label: tests/model_fields/test_x.py -> model_fields.test_x
    labels = [p[len("tests/"):-3].replace("/", ".") for p in _py_files(selected) if p.startswith("tests/")]
    opts = ["--verbosity", "2"] + (["--parallel", "1"] if "--parallel" in text else [])
    return TestPlan(f"cd tests && python runtests.py {' '.join(opts)} {_q(labels)}".strip(), "django")


def _runtests(snap: Snapshot, selected: list[str]) -> TestPlan:
    return TestPlan(f"python runtests.py {_q(_py_files(selected))}".strip(), "auto")


def tox_testenv(snap: Snapshot) -> tuple[dict[str, str], list[str]] | None:
    """(setenv, commands) of tox.ini's ``[testenv]``, factor-conditional lines left out."""
    text = snap.read("tox.ini")
    if not text:
        return None
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cp.read_string(text)
    except configparser.Error:
        return None
    if not cp.has_section("testenv") or not cp.get("testenv", "commands", fallback="").strip():
        return None
    env = {}
    for line in cp.get("testenv", "setenv", fallback="").splitlines():
        if "=" in line and not re.match(r"^\s*[\w,{}-]+:", line):
            key, value = (s.strip() for s in line.split("=", 1))
            env[key] = re.sub(r"\{env:[^}:]*:?([^}]*)\}", r"\1", value)  # {env:X:default} -> default
    cmds = [c.strip() for c in cp.get("testenv", "commands").splitlines()
            if c.strip() and not re.match(r"^[\w,{}-]+:\s", c.strip())]
    return (env, cmds) if cmds else None


def _tox(snap: Snapshot, selected: list[str]) -> TestPlan:
    """tox's own test environment run in the image's (tox ``--current-env``): its setenv and
    commands, ``{posargs}`` the chosen files."""
    env, cmds = tox_testenv(snap) or ({}, [])
    files = _q(_py_files(selected))
    lines = [re.sub(r"\{posargs(?::[^}]*)?\}", files, c) for c in cmds]
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
    return TestPlan(exports + " && ".join(lines), "auto")


def _make(snap: Snapshot, selected: list[str]) -> TestPlan:
    return TestPlan("make test", "auto")


PLANS = {"bin/test": _bin_test, "django": _django, "runtests.py": _runtests, "tox": _tox, "make": _make}


def find(snap: Snapshot) -> str | None:
    """The runner kind this tree ships, in order of how specific it is; None when it has none."""
    if snap.has("bin/test") and "import" in (snap.read("bin/test", limit=20_000) or ""):
        return "bin/test"
    if snap.has("tests/runtests.py") and "django" in (snap.read("tests/runtests.py", limit=50_000) or "").lower():
        return "django"
    if snap.has("runtests.py"):
        return "runtests.py"
    # a tox or make target that runs pytest itself is no other runner: pytest failed already
    tox = tox_testenv(snap)
    if tox and not any(re.search(r"\b(py\.test|pytest)\b", c) for c in tox[1]):
        return "tox"
    make = re.search(r"^test:.*\n((?:\t.*\n?)*)", snap.read("Makefile") or "", re.M)
    if make and not re.search(r"\b(py\.test|pytest)\b", make.group(1)):
        return "make"
    return None


def plan(kind: str, snap: Snapshot, selected: list[str] | None = None) -> TestPlan:
    return PLANS[kind](snap, selected or [])
