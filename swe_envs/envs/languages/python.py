"""Python: uv installs from the repository's requirements and build files (with the era's cut-off;
build tooling may be newer), pytest with SWE-bench's test ids."""

from __future__ import annotations

import re

from swe_envs.envs.languages.base import RecipeOptions, TestPlan, quote
from swe_envs.repos import Snapshot

PY_TEST_REQUIREMENTS = ("requirements-test.txt", "requirements-tests.txt", "test-requirements.txt",
                        "requirements/test.txt", "requirements/tests.txt", "tests/requirements.txt")
PY_DEV_REQUIREMENTS = ("requirements-dev.txt", "requirements/dev.txt", "dev-requirements.txt")
UV_PIP = "uv pip install --python /opt/venv/bin/python"


# build tooling may be newer than the era, the code under test and its dependencies are not:
# editable installs need a PEP 660 backend (setuptools >= 64, 2022-08), and uv builds any sdist
# without a pyproject (requests 2.3's pinned py==1.4.12, 2012) with setuptools >= 40.8, which
# a 2014 cut-off filters out, so every install line gets it; and wheel with it (setuptools < 70.1
# imports wheel.wheelfile for an editable wheel, which wheel's 2014 releases do not have)
EDITABLE_SETUPTOOLS = "2023-06-30"
BUILD_TOOLS = ("setuptools", "wheel")


def uv_install(exclude_newer: str | None) -> str:
    """The install line's prefix under the era's cut-off (a day), its build tools exempt."""
    # a timestamp at the end of the day: releases of that day count as available
    if not exclude_newer:
        return UV_PIP
    cmd = f"{UV_PIP} --exclude-newer {exclude_newer}T23:59:59Z"
    if exclude_newer < EDITABLE_SETUPTOOLS:
        cmd += "".join(f" --exclude-newer-package {tool}={EDITABLE_SETUPTOOLS}" for tool in BUILD_TOOLS)
    return cmd


def scm_version(version: str | None) -> str:
    """A PEP 440 version for setuptools-scm, which cannot read one from an exported tree."""
    parts = re.findall(r"\d+", version or "")
    return ".".join((parts + ["0", "0", "0"])[:3]) if parts else "0.0.0"


def testbed_requires(extras: tuple[str, ...] = ()) -> str:
    """The snippet writing the requirements of the distribution installed from /testbed (its
    metadata, markers kept) to /tmp/swe-requires.txt. An extra's requirements lose their
    ``extra == "x"`` marker, so installing the list installs them (uv evaluates it false)."""
    item, modules = "r", "json"
    if extras:
        alt = "|".join(re.escape(e) for e in extras)  # the marker's quotes matched by ".": the shell's are single
        item, modules = f're.sub(r"\\s*(?:and\\s+)?extra\\s*==\\s*.(?:{alt}).", "", r).rstrip("; ")', "json, re"
    return (f"python -c 'import importlib.metadata as m, {modules}; print(\"\\n\".join({item} for d in m.distributions() "
            "if json.loads(d.read_text(\"direct_url.json\") or \"{}\").get(\"url\") == \"file:///testbed\" "
            "for r in (d.requires or [])))' > /tmp/swe-requires.txt")


def editable_with_version(uv: str, version: str, extras: tuple[str, ...] = (), pins: str = "") -> list[str]:
    """setuptools-scm cannot read a version from an exported tree, so the project gets a pretend
    one. The variable must not reach the builds of its dependencies: an sdist that uses
    setuptools-scm too would get the project's version as its own, the resolver would reject it
    and fall back to an ancient release (iniconfig 1.0.0 -> 0.1 for pytest 5.4/6.0, whose ini
    parser then breaks pytest's own ini tests). So the project is installed alone with the
    variable, then its requirements (its extras' too), with the same resolver options, without it."""
    return [f"SETUPTOOLS_SCM_PRETEND_VERSION={version} {uv} --no-deps -e .",
            testbed_requires(extras),
            f"if [ -s /tmp/swe-requires.txt ]; then {uv} -r /tmp/swe-requires.txt{pins}; fi"]


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    uv = uv_install(opts.exclude_newer)
    # runtime pins, then the test pins; a dev file (docs, linters, ...) only when no test file exists
    reqs = [r for r in ("requirements.txt",) if snap.has(r)]
    tests = [r for r in PY_TEST_REQUIREMENTS if snap.has(r)][:1]
    reqs += tests or [r for r in PY_DEV_REQUIREMENTS if snap.has(r)][:1]
    cmds = [f"{uv} -r {req}" for req in reqs]
    build_files = "\n".join(snap.read(n) or "" for n in ("setup.py", "setup.cfg", "pyproject.toml"))
    if any(snap.has(n) for n in ("pyproject.toml", "setup.py", "setup.cfg")):
        # a dataset harness's extras and pins (config.EnvProfile) resolve together with the repository
        pins = "".join(f" {quote([r])}" for r in opts.requirements)
        if re.search(r"setuptools[_-]scm", build_files):
            # setuptools-scm reads the version from git metadata, which an exported tree lacks
            cmds += editable_with_version(uv, scm_version(opts.version), opts.extras, pins)
        else:
            target = quote([f".[{','.join(opts.extras)}]"]) if opts.extras else "."
            cmds.append(f"{uv} -e {target}{pins}")
    # pytest is tooling, like the build tools: unless the repository's own requirements (or the
    # repository) gave one, the newest for the interpreter, as SWE-bench's harness installs it
    # (unpinned), so ids are its datasets' (pytest 8 writes a repeated parametrize id ending in a
    # digit as ``1234-1234_0``, 5.x-7.x as ``1234-12340``: sphinx 3.1's test_unparse); where it
    # crashes on old code, a rule gives the interpreter's era's (rules.python._era_test_runner)
    cmds.append(f"python -c 'import pytest' 2>/dev/null || {UV_PIP} pytest")
    cmds.append("uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt")
    return cmds


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    files = [p for p in selected if p.endswith(".py") and p.rsplit("/", 1)[-1] != "conftest.py"
             and not ignored_by_conftest(snap, p)]
    names = [p.rsplit("/", 1)[-1] for p in snap.files if p.endswith(".py")]
    if not files and not any(n.startswith("test_") or n.endswith("_test.py") for n in names):
        # tests only in files pytest does not collect by default, as nose's pattern found them
        # (itsdangerous 0.24's tests.py, tqdm 4.45's tests/tests_*.py): named
        files = [p for p in snap.files if p.endswith(".py") and (
            p.rsplit("/", 1)[-1] in ("tests.py", "test.py") or p.rsplit("/", 1)[-1].startswith("tests_"))]
    cmd = "python -m pytest -rA -v -p no:cacheprovider --tb=short --color=no"
    installed = any(snap.has(n) for n in ("pyproject.toml", "setup.py", "setup.cfg"))
    if not installed and any(f.startswith("src/") and f.endswith(".py") for f in snap.files):
        cmd = "PYTHONPATH=/testbed/src${PYTHONPATH:+:$PYTHONPATH} " + cmd  # src layout, nothing installs it
    # test ids as SWE-bench's harness writes them, so F2P/P2P compare with its datasets
    return TestPlan(f"{cmd} {quote(files)}".strip(), "pytest-swebench")


def leave_out(command: str, modules: list[str]) -> str:
    """The pytest command without ``modules`` (a Python 2 test module that stops the collection:
    ``rules.python.py2_test_modules``); ``--ignore`` is pytest's own way, the tree stays as it is."""
    return " ".join([command, *(f"--ignore={quote([m])}" for m in modules)])


_COLLECT_IGNORE = re.compile(r"^collect_ignore\s*=\s*\[([^\]]*)\]", re.M)


def ignored_by_conftest(snap: Snapshot, path: str) -> bool:
    """``path`` lies under a directory a conftest.py's ``collect_ignore`` names (sphinx's
    ``tests/roots``: sample projects, not test modules; given to pytest by name, their modules
    are imported as tests and break the collection)."""
    parts = path.split("/")
    for i in range(len(parts) - 1):
        base = "/".join(parts[:i])
        text = snap.read(f"{base}/conftest.py" if base else "conftest.py", limit=100_000) or ""
        for m in _COLLECT_IGNORE.finditer(text):
            for name in re.findall(r"""['"]([^'"]+)['"]""", m.group(1)):
                target = f"{base}/{name}".strip("/") if base else name.strip("/")
                if path == target or path.startswith(target.rstrip("/") + "/"):
                    return True
    return False
