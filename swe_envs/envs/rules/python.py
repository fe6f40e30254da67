"""Python: rule-based recipe repairs for uv installs and pytest runs (``swe_envs.envs.rules`` dispatches here).

Each rule reads the failure log and returns the revised recipe, or None when it does not apply or
its fix is already there. Tooling (setuptools, wheel, pytest) may be newer than the repo-version's
era; the code under test and its dependencies are not, unless a rule records why one must be.
"""

from __future__ import annotations

import re

from swe_envs.envs.languages.python import BUILD_TOOLS, UV_PIP, editable_with_version, uv_install

# import name -> distribution name, where they differ (the common cases)
PY_DISTRIBUTIONS = {
    "yaml": "PyYAML", "attr": "attrs", "dateutil": "python-dateutil", "PIL": "Pillow", "sklearn": "scikit-learn",
    "cv2": "opencv-python", "bs4": "beautifulsoup4", "Crypto": "pycryptodome", "OpenSSL": "pyOpenSSL",
    "jwt": "PyJWT", "magic": "python-magic", "dotenv": "python-dotenv", "git": "GitPython", "serial": "pyserial",
    "google.protobuf": "protobuf", "pkg_resources": "setuptools", "setuptools_scm": "setuptools-scm",
    "_cffi_backend": "cffi", "mpl_toolkits": "matplotlib", "docutils": "docutils", "hamcrest": "PyHamcrest",
}
# Python 2's standard library names that Python 3 renamed or dropped: no distribution provides them
PY2_STDLIB = {"StringIO", "cStringIO", "urllib2", "urlparse", "ConfigParser", "Queue", "HTMLParser", "httplib",
              "cPickle", "__builtin__", "Tkinter", "commands", "exceptions", "sets", "thread", "copy_reg",
              "SocketServer", "SimpleHTTPServer", "BaseHTTPServer", "Cookie", "cookielib", "xmlrpclib", "UserDict",
              "UserList", "UserString", "htmlentitydefs", "robotparser", "anydbm", "md5", "sha", "new", "popen2",
              "mimetools", "rfc822", "sgmllib", "htmllib", "dircache"}
# namespace packages: the distribution is the dotted name under the root
NAMESPACE_ROOTS = ("zope", "backports", "jaraco", "sphinxcontrib", "ruamel", "repoze", "paste", "flufl", "azure",
                   "google")
_PY_MISSING = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
_COMPILER = re.compile(r"(gcc|cc|x86_64-linux-gnu-gcc|g\+\+)'? (failed|not found)|command '[^']*gcc' failed|"
                       r"Python\.h: No such file|error: command 'cc'|No such file or directory: 'gcc'|"
                       r"unable to execute '[^']*gcc'")
_SCM = re.compile(r"setuptools-scm was unable to detect version|LookupError: .*setuptools_scm|"
                  r"unable to detect version for")
_BUILD_ISOLATION = re.compile(r"Failed to build `[^`]+`|Failed to (build|prepare) .*metadata|"
                              r"error: subprocess-exited-with-error|Getting requirements to build")
_UNSOLVABLE = re.compile(r"No solution found when resolving dependencies|Because there are no versions of|"
                         r"no versions? of .* (?:are|is) available")


def _python_missing(recipe: list[str], log: str, era: str | None = None) -> list[str] | None:
    # the era's cut-off: an install line's that has one, else the environment's (pytest's own line is
    # unpinned: tooling, so a repository with no requirements has no line that says the era)
    pinned = [line for line in recipe if UV_PIP in line and "--exclude-newer " in line]
    uv = _uv_prefix(pinned[0]) if pinned else uv_install(era)
    names = []
    for mod in _PY_MISSING.findall(log):
        if mod in PY2_STDLIB:  # Python 2 code (a py2-only test module): nothing to install
            continue
        top = mod if mod in PY_DISTRIBUTIONS else mod.split(".")[0]
        if top in NAMESPACE_ROOTS:  # 'zope' of `import zope.interface` is no distribution: zope.interface is
            sub = re.search(rf"(?:import|from)\s+({re.escape(top)}\.[A-Za-z0-9_]+)", log)
            top = sub.group(1) if sub else top
        dist = PY_DISTRIBUTIONS.get(top, top.replace("_", "-"))
        if dist not in names and not any(re.search(rf"\s{re.escape(dist)}(\s|$)", line) for line in recipe):
            names.append(dist)
    if not names:
        return None
    # before the freeze line, so the resolved set records them
    return _before_freeze(recipe, f"{uv} {' '.join(names)}")


def _uv_prefix(line: str) -> str:
    """``uv pip install --python P [--exclude-newer D]`` of an existing recipe line, with its build
    tools' cut-offs (an sdist among the added packages needs them as much as the line's own)."""
    m = re.search(re.escape(UV_PIP) + r"(?: --exclude-newer \S+)?", line)
    if not m:
        return UV_PIP
    tools = re.findall(rf" --exclude-newer-package (?:{'|'.join(BUILD_TOOLS)})=\S+", line)
    return m.group(0) + "".join(tools)


def _before_freeze(recipe: list[str], cmd: str) -> list[str]:
    idx = next((i for i, line in enumerate(recipe) if line.startswith("uv pip freeze")), len(recipe))
    return recipe[:idx] + [cmd] + recipe[idx:]


def _compiler(recipe: list[str], log: str) -> list[str] | None:
    if not _COMPILER.search(log) or any("build-essential" in line for line in recipe):
        return None
    return ["apt-get install -y --no-install-recommends build-essential pkg-config"] + recipe


def _scm_version(recipe: list[str], log: str) -> list[str] | None:
    if not _SCM.search(log) or any("SETUPTOOLS_SCM_PRETEND_VERSION" in line for line in recipe):
        return None
    out = []
    for line in recipe:
        # the repository's install line: `-e .`, or a profile's `-e '.[extras]' 'pin' ...` (config.EnvProfile)
        m = _EDITABLE_AT.search(line)
        out += editable_with_version(line[:m.start()], "0.0.0", tuple(filter(None, (m[2] or "").split(","))),
                                     line[m.end():]) if m and not line.startswith("SETUPTOOLS_SCM") else [line]
    return out


# the repository's own install target in a line: `-e .`, or with a profile's extras `-e '.[test]'` (its pins follow)
_EDITABLE_AT = re.compile(r" -e (\.|'\.\[([\w.,-]+)\]')(?= |$)")


def _editable_backend(recipe: list[str], log: str) -> list[str] | None:
    """A backend without PEP 660 (``build_editable``): let setuptools be new enough for it."""
    from swe_envs.envs.languages.python import EDITABLE_SETUPTOOLS

    if "has no attribute 'build_editable'" not in log or "--exclude-newer-package setuptools" in " ".join(recipe):
        return None
    return [_EDITABLE_AT.sub(lambda m: f" --exclude-newer-package setuptools={EDITABLE_SETUPTOOLS} -e {m[1]}", line, 1)
            if _EDITABLE_AT.search(line) and "--exclude-newer " in line else line for line in recipe]


def _no_build_isolation(recipe: list[str], log: str) -> list[str] | None:
    """An isolated build env that fails to resolve (era build deps): build with the venv's own tools."""
    if not _BUILD_ISOLATION.search(log) or any("--no-build-isolation" in line for line in recipe):
        return None
    failed = _FAILED_STEP.findall(log)
    out, changed = [], False
    for line in recipe:
        if _EDITABLE_AT.search(line) and UV_PIP in line and (not failed or line in failed):  # the step that failed
            # the build tools with the line's own cut-offs (build tooling may be newer than the era)
            out.append(_EDITABLE_AT.sub(" setuptools wheel", line, 1))
            out.append(_EDITABLE_AT.sub(lambda m: f" --no-build-isolation -e {m[1]}", line, 1))
            changed = True
        else:
            out.append(line)
    return out if changed else None


FILTERED_BY_CUTOFF = "was filtered by `exclude-newer`"  # uv's hint when the cut-off hid what a requirement needs
_FILTERED = re.compile(rf"`([A-Za-z0-9_.-]+)` {re.escape(FILTERED_BY_CUTOFF)}.*?published at (\d{{4}}-\d{{2}}-\d{{2}})", re.S)
REBASED_GAP_DAYS = 30
_CUTOFF = re.compile(r"--exclude-newer (\d{4}-\d{2}-\d{2})T")


def _commit_cutoff(recipe: list[str], log: str, commit_day: str | None) -> list[str] | None:
    """The era cut-off (the task's date) is older than the commit it builds and the repository's own
    requirements have no release before it: SWE-bench's base commit of a pull request opened long
    before it was rebased (sphinx-10614: opened 2022-06-29, based on sphinx 7.2 of 2023-08, which
    needs pygments>=2.14 of 2023-01). The commit's date is the cut-off then: its code was built with
    what existed when it was committed. Builds that resolve keep the task's date. A commit only days
    newer than the task is the usual base of a pull request opened then: a package missing there was
    deleted and re-uploaded, the per-package rule's case, so this one waits for a month's gap."""
    from datetime import date, timedelta

    if not commit_day or not _UNSOLVABLE.search(log) or FILTERED_BY_CUTOFF not in log:
        return None
    out, changed = [], False
    for line in recipe:
        m = _CUTOFF.search(line)
        if m and date.fromisoformat(m[1]) + timedelta(days=REBASED_GAP_DAYS) < date.fromisoformat(commit_day):
            line = line.replace(f"--exclude-newer {m[1]}", f"--exclude-newer {commit_day}", 1)
            changed = True
        out.append(line)
    return out if changed else None


def _package_cutoff(recipe: list[str], log: str) -> list[str] | None:
    """A dependency with no release before the era cut-off (deleted and re-uploaded, say): let that
    one package through at its first remaining release, as uv's hint says; the rest stay era-pinned."""
    found = {name: day for name, day in _FILTERED.findall(log)}
    if not found:
        return None
    out, changed = [], False
    for line in recipe:
        if "--exclude-newer " in line:
            for name, day in found.items():
                if f"--exclude-newer-package {name}=" not in line:
                    line = line.replace("--exclude-newer ", f"--exclude-newer-package {name}={day}T23:59:59Z "
                                        "--exclude-newer ", 1)
                    changed = True
        out.append(line)
    return out if changed else None


_SITE_FRAME = re.compile(r'File "[^"]*/lib/python(3\.\d+)/site-packages/([A-Za-z0-9_]+)[/.]')
_CRASH = re.compile(r"^(AttributeError|TypeError|ImportError|SyntaxError|NameError): ", re.M)


def _interpreter_era_package(recipe: list[str], log: str) -> list[str] | None:
    """An era-pinned dependency crashing inside its own code on this (newer) interpreter, e.g.
    importlib_metadata 0.18 on Python 3.9: let that package through up to half a year after the
    interpreter's release; every other package keeps the repo-version's cut-off."""
    from datetime import date, timedelta

    from swe_envs.envs.rules.era import RELEASED

    tb = log.rfind("Traceback (most recent call last)")
    if tb < 0 or not _CRASH.search(log, tb):
        return None
    frames = _SITE_FRAME.findall(log, tb)
    if not frames:
        return None
    python, module = frames[-1]
    released = RELEASED["python"].get(python)
    if released is None or module in ("pip", "setuptools", "_pytest", "pytest"):
        return None
    dist = PY_DISTRIBUTIONS.get(module, module.replace("_", "-"))
    day = (date.fromisoformat(released) + timedelta(days=182)).isoformat()
    out, changed = [], False
    for line in recipe:
        if "--exclude-newer " in line and f"--exclude-newer-package {dist}=" not in line:
            line = line.replace("--exclude-newer ", f"--exclude-newer-package {dist}={day}T23:59:59Z --exclude-newer ", 1)
            changed = True
        out.append(line)
    return out if changed else None


_FAILED_STEP = re.compile(r"The command '/bin/sh -c (.*?)' returned a non-zero code")
# what setuptools removed that setup.py scripts of the Python 2 era use: the last release with it
_SETUPTOOLS_REMOVED = {"use_2to3 is invalid": "2021-08-31",  # 58.0, 2021-09
                       "cannot import name 'Feature' from 'setuptools'": "2019-12-31"}  # 46.0, 2020-03


def _older_setuptools(recipe: list[str], log: str) -> list[str] | None:
    """A setup.py (an sdist's, or the project's own: requests 1.x's pins, MarkupSafe 1.0) uses what
    setuptools removed: the failed install line builds with the last setuptools that had it. The
    other lines keep theirs. No such setuptools builds an editable wheel (PEP 660 is >= 64), so an
    editable project install becomes a regular one: ``python -m pytest`` in /testbed imports the
    tree's sources all the same (the working directory leads sys.path)."""
    day = next((d for marker, d in _SETUPTOOLS_REMOVED.items() if marker in log), None)
    failed = _FAILED_STEP.findall(log)
    if day is None or not failed:
        return None
    out, changed = [], False
    for line in recipe:
        if UV_PIP in line and line in failed and f"setuptools={day}" not in line:
            line = re.sub(r" --exclude-newer-package setuptools=\S+| --no-build-isolation", "", line)
            line = line.replace(UV_PIP, f"{UV_PIP} --exclude-newer-package setuptools={day}", 1)
            line, changed = _EDITABLE_AT.sub(lambda m: f" {m[1]}", line, 1), True
        out.append(line)
    return out if changed else None


_REQUIREMENTS_LINE = re.compile(re.escape(UV_PIP) + r".* -r (\S+)$")


def _drop_requirements(recipe: list[str], log: str) -> list[str] | None:
    """A requirements file whose pins do not build on this interpreter, after the build-tool rules
    (requests 1.1's `pytest sphinx`: the era's jinja2 2.6 needs setuptools' Feature, gone since 46):
    left out, as SWE-bench's specs for such repos never install it; the project's own install and
    the test runner stay. Recorded as a rule round like any other."""
    failed = _FAILED_STEP.findall(log)
    if not _BUILD_ISOLATION.search(log) or not failed:
        return None
    out = [line for line in recipe if not (line in failed and _REQUIREMENTS_LINE.match(line))]
    return out if len(out) < len(recipe) else None


# documentation tooling a requirements file may pin to the era: never needed by a test suite (the
# specs SWE-bench writes for such repositories install none of it)
# (a name starting with sphinx, mkdocs, myst or readthedocs: their themes and extensions too)
DOCS_PACKAGES = ("sphinx[A-Za-z0-9_.-]*", "mkdocs[A-Za-z0-9_.-]*", "myst[A-Za-z0-9_.-]*", "readthedocs[A-Za-z0-9_.-]*",
                 "docutils", "alabaster", "furo", "recommonmark", "numpydoc", "pydata-sphinx-theme", "releases")
_DOCS_NAMED = re.compile(r"`(sphinx[\w.-]*|docutils|alabaster|furo|myst[\w.-]*|recommonmark|numpydoc|mkdocs[\w.-]*|"
                         r"readthedocs[\w.-]*|pydata-sphinx-theme|releases)`", re.I)
NODOCS = "/tmp/swe-requirements-without-docs.txt"


def _drop_docs_requirements(recipe: list[str], log: str) -> list[str] | None:
    """A requirements file's install failed and uv names documentation tooling in it (requests 1.x:
    ``sphinx`` pulls the era's jinja2 2.6, whose setup.py imports setuptools' removed Feature): the
    file is installed without its docs lines, first, before rules that change the build tools;
    what the tests need stays. (A file of docs alone installs nothing.)"""
    failed = _FAILED_STEP.findall(log)
    if not failed or not _DOCS_NAMED.search(log):
        return None
    names = "|".join(DOCS_PACKAGES)
    out, changed = [], False
    for line in recipe:
        m = _REQUIREMENTS_LINE.match(line)
        if m and line in failed and NODOCS not in line:
            # sed's I flag: names are case-insensitive (Sphinx, Docutils); uv installs nothing
            # from a file left empty
            out.append(f"sed -E '/^[[:space:]]*({names})([^A-Za-z0-9_.-]|$)/Id' {m.group(1)} > {NODOCS}")
            line, changed = line[: m.start(1)] + NODOCS, True
        out.append(line)
    return out if changed else None


def _drop_exclude_newer(recipe: list[str], log: str) -> list[str] | None:
    """Pins newer than the era cut-off (or nothing that old for this interpreter): resolve without it."""
    if not _UNSOLVABLE.search(log) or not any("--exclude-newer" in line for line in recipe):
        return None
    return [re.sub(r" --exclude-newer \S+", "", line) for line in recipe]


# the test command's options (-rA, --color, -p no:cacheprovider) that a repo's own pinned pytest
# (requests 2.3 pins pytest 2.3.4) does not know
_RUNNER_TOO_OLD = re.compile(r"(?:pytest|py\.test)(?:\.py)?: error: (?:no such option|unrecognized arguments)|"
                             r"INTERNALERROR>\s+File \"[^\"]*/site-packages/_pytest/|"  # or crashes on this Python
                             r"site-packages/_pytest/\S+: in \S+\n(?:.*\n){0,4}E\s+RuntimeError: generator raised "
                             r"StopIteration")  # PEP 479 (3.7) in old pytest's pluggy


_OLD_PLUGIN = re.compile(r"PluginValidationError: unknown hook '\w+' in plugin <module '([A-Za-z0-9_]+)' from "
                         r"'[^']*/site-packages/")


def _era_test_runner(recipe: list[str], log: str, interpreter: str | None) -> list[str] | None:
    """The test runner is tooling, like the build tools: when the repo-version's pinned pytest
    rejects the test command, or the newest one the recipe installs crashes on the code, pytest (and
    what it needs) as of half a year after the interpreter's release; the code under test keeps its era."""
    from datetime import date, timedelta

    from swe_envs.envs.rules.era import RELEASED

    released = RELEASED["python"].get(interpreter or "")
    tooling = next((i for i, line in enumerate(recipe) if line.endswith(" --upgrade-package pytest pytest")
                    or " --upgrade-package pytest pytest " in line), None)
    plugin = _OLD_PLUGIN.search(log)
    if tooling is not None and plugin:  # a pinned plugin of the old pytest: of the runner's era too
        dist = PY_DISTRIBUTIONS.get(plugin.group(1), plugin.group(1).replace("_", "-"))
        if f" {dist} " in recipe[tooling] + " ":
            return None
        return recipe[:tooling] + [f"{recipe[tooling]} --upgrade-package {dist} {dist}"] + recipe[tooling + 1:]
    if not _RUNNER_TOO_OLD.search(log) or released is None or tooling is not None:
        return None
    day = (date.fromisoformat(released) + timedelta(days=182)).isoformat()
    return _before_freeze(recipe, f"{UV_PIP} --exclude-newer {day}T23:59:59Z --upgrade-package pytest pytest")


# pytest >= 4 refuses a setup.cfg ``[pytest]`` section (six 1.10.0's); a pytest.ini of the same
# options is read first (pytest.ini precedes setup.cfg), and the tracked files stay as they are
_SETUP_CFG_SECTION = "[pytest] section in setup.cfg files is no longer supported"
PYTEST_INI = ("[ -e pytest.ini ] || { echo '[pytest]'; sed -n '/^\\[pytest\\]/,/^\\[/{/^\\[/!p}' setup.cfg; } "
              "> pytest.ini")


def _setup_cfg_pytest_section(recipe: list[str], log: str) -> list[str] | None:
    if _SETUP_CFG_SECTION not in log or PYTEST_INI in recipe:
        return None
    return _before_freeze(recipe, PYTEST_INI)


# pytest >= 7.2 ships a ``py`` shim of py.path and py.error alone; suites of the py.test days use
# ``py.test.mark``, ``py.std``, ``py.builtin`` (six 1.10.0). The pylib itself, tooling like pytest
# (unpinned: its ``py.test`` is the installed pytest), takes the shim's place (a package precedes a module)
_PYLIB = re.compile(r"module 'py' has no attribute '\w+'")


def _pylib(recipe: list[str], log: str) -> list[str] | None:
    if not _PYLIB.search(log) or any(re.search(r"\spy(\s|$)", line) for line in recipe):
        return None
    return _before_freeze(recipe, f"{UV_PIP} py")


_COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (\S+\.py) _+$", re.M)
_COLLECTED = re.compile(r"collected (\d+) items? / (\d+) errors?")
_PY2_SYNTAX = re.compile(r"Missing parentheses in call to '(?:print|exec)'|leading zeros in decimal integer literals|"
                         r"^E?\s*except\s+[\w.]+\s*,\s*\w+\s*:|^E?\s*raise\s+[\w.]+\s*,|"
                         r"^E?\s*print\s+[\"'\w]", re.M)  # the source line as pytest shows it (E-prefixed)


def py2_test_modules(log: str) -> list[str]:
    """Test modules whose collection error is Python 2 code on Python 3 (simplejson 3.8.0's
    test_iterable.py imports ``StringIO``): what a ``--ignore`` leaves out so the rest of the suite
    runs. Empty unless every collection error is such a module and pytest collected other tests:
    any other error is a broken environment, for the other rules to fix."""
    counts = _COLLECTED.search(log)
    heads = list(_COLLECT_ERROR.finditer(log))
    if not counts or int(counts.group(1)) == 0 or len(heads) != int(counts.group(2)):
        return []
    modules = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else log.find("short test summary info", head.end())
        block = log[head.end(): end if end > 0 else len(log)]
        names = _PY_MISSING.findall(block)
        if not (_PY2_SYNTAX.search(block) or (names and all(n in PY2_STDLIB for n in names))):
            return []
        modules.append(head.group(1))
    return modules


def python_rules(recipe: list[str], log: str, interpreter: str | None = None, era: str | None = None,
                 commit_day: str | None = None) -> tuple[list[str], str] | None:
    """(revised recipe, rule name) or None; interpreter: the toolchain's Python version (tooling of its era);
    era: the environment's cut-off day (a package the log misses is pinned to it); commit_day: the
    built commit's date (a cut-off that leaves the repository's requirements unsolvable moves there)."""
    fixed = _era_test_runner(recipe, log, interpreter)
    if fixed is not None:
        return fixed, "test runner of the interpreter's era"
    for name, rule in (("docs requirements left out", _drop_docs_requirements),
                       ("pytest.ini from setup.cfg's [pytest]", _setup_cfg_pytest_section),
                       ("the py library for py.test", _pylib),
                       ("compiler", _compiler), ("setuptools-scm version", _scm_version),
                       ("PEP 660 backend", _editable_backend), ("setuptools of the Python 2 era", _older_setuptools),
                       ("missing module", lambda r, lg: _python_missing(r, lg, era)), ("no build isolation", _no_build_isolation),
                       ("cut-off at the commit's date", lambda r, lg: _commit_cutoff(r, lg, commit_day)),
                       ("per-package cut-off", _package_cutoff), ("package of the interpreter's era",
                                                                   _interpreter_era_package),
                       ("drop exclude-newer", _drop_exclude_newer),
                       ("requirements file left out", _drop_requirements)):
        fixed = rule(recipe, log)
        if fixed is not None and fixed != recipe:
            return fixed, name
    return None
