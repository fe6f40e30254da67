"""Rule-based recipe repairs: what a failed build or test collection says, and the fix it wants.

Tried before the LLM and without one, every refine round: each rule reads the failure log and
returns the revised recipe (or None when it does not apply, or its fix is already there), so
the loop keeps going for all ``refine_rounds``. The interpreter switch (a removed stdlib name
-> an older Python) is the builder's, since it changes the toolchain image (``era.older_wanted``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from swe_envs.crates import DEBIAN_CRATES, cargo_deps, cargo_source_line, debian_crate_package
from swe_envs.envs import rules_java, rules_php, rules_ruby, rules_rust
from swe_envs.envs.languages import BUILD_TOOLS, UV_PIP, editable_with_version
from swe_envs.envs.parsers.base import clean
from swe_envs.repos import Snapshot

# Part of every verified environment's cache key (builder): an image verified under older rules,
# parsers or collect checks is not reused once they change. Bump it with any change to what a
# recipe installs, how a run is parsed, or what the collect check accepts.
RULES_VERSION = "2026-11-30.5"

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
_JS_MISSING = re.compile(r"Cannot find module '([a-z0-9@][a-z0-9@/._-]*)'")
_RB_MISSING = re.compile(r"cannot load such file -- ([a-z0-9_-]+)")
_COMPILER = re.compile(r"(gcc|cc|x86_64-linux-gnu-gcc|g\+\+)'? (failed|not found)|command '[^']*gcc' failed|"
                       r"Python\.h: No such file|error: command 'cc'|No such file or directory: 'gcc'|"
                       r"unable to execute '[^']*gcc'")
_SCM = re.compile(r"setuptools-scm was unable to detect version|LookupError: .*setuptools_scm|"
                  r"unable to detect version for")
_BUILD_ISOLATION = re.compile(r"Failed to build `[^`]+`|Failed to (build|prepare) .*metadata|"
                              r"error: subprocess-exited-with-error|Getting requirements to build")
_UNSOLVABLE = re.compile(r"No solution found when resolving dependencies|Because there are no versions of|"
                         r"no versions? of .* (?:are|is) available")


def _python_missing(recipe: list[str], log: str) -> list[str] | None:
    uv = next((_uv_prefix(line) for line in recipe if UV_PIP in line), UV_PIP)
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
        out += editable_with_version(line, "0.0.0") if line.endswith(" -e .") else [line]
    return out


def _editable_backend(recipe: list[str], log: str) -> list[str] | None:
    """A backend without PEP 660 (``build_editable``): let setuptools be new enough for it."""
    from swe_envs.envs.languages import EDITABLE_SETUPTOOLS

    if "has no attribute 'build_editable'" not in log or "--exclude-newer-package setuptools" in " ".join(recipe):
        return None
    return [line.replace(" -e .", f" --exclude-newer-package setuptools={EDITABLE_SETUPTOOLS} -e .")
            if " -e ." in line and "--exclude-newer " in line else line for line in recipe]


def _no_build_isolation(recipe: list[str], log: str) -> list[str] | None:
    """An isolated build env that fails to resolve (era build deps): build with the venv's own tools."""
    if not _BUILD_ISOLATION.search(log) or any("--no-build-isolation" in line for line in recipe):
        return None
    failed = _FAILED_STEP.findall(log)
    out, changed = [], False
    for line in recipe:
        if " -e ." in line and UV_PIP in line and (not failed or line in failed):  # the step that failed
            # the build tools with the line's own cut-offs (build tooling may be newer than the era)
            out.append(line.replace(" -e .", " setuptools wheel"))
            out.append(line.replace(" -e .", " --no-build-isolation -e ."))
            changed = True
        else:
            out.append(line)
    return out if changed else None


_FILTERED = re.compile(r"`([A-Za-z0-9_.-]+)` was filtered by `exclude-newer`.*?published at (\d{4}-\d{2}-\d{2})", re.S)


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

    from swe_envs.envs.era import RELEASED

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
            line, changed = line.replace(" -e .", " ."), True
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
    rejects the test command, pytest (and what it needs) as of half a year after the interpreter's
    release (SWE-bench's harness installs a current pytest too); the code under test keeps its era."""
    from datetime import date, timedelta

    from swe_envs.envs.era import RELEASED

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


def _python_rules(recipe: list[str], log: str, interpreter: str | None = None) -> tuple[list[str], str] | None:
    fixed = _era_test_runner(recipe, log, interpreter)
    if fixed is not None:
        return fixed, "test runner of the interpreter's era"
    for name, rule in (("compiler", _compiler), ("setuptools-scm version", _scm_version),
                       ("PEP 660 backend", _editable_backend), ("setuptools of the Python 2 era", _older_setuptools),
                       ("missing module", _python_missing), ("no build isolation", _no_build_isolation),
                       ("per-package cut-off", _package_cutoff), ("package of the interpreter's era",
                                                                   _interpreter_era_package),
                       ("drop exclude-newer", _drop_exclude_newer),
                       ("requirements file left out", _drop_requirements)):
        fixed = rule(recipe, log)
        if fixed is not None and fixed != recipe:
            return fixed, name
    return None


def _apt_missing(rx: re.Pattern, pattern: str) -> Callable[[list[str], str], tuple[list[str], str] | None]:
    def rule(recipe: list[str], log: str) -> tuple[list[str], str] | None:
        names = sorted({m.lower().replace("_", "-").lstrip("@").replace("/", "-") for m in rx.findall(log)})
        pkgs = [pattern.format(n) for n in names if not any(pattern.format(n) in line for line in recipe)]
        if not pkgs:
            return None
        return recipe + [f"apt-get install -y --no-install-recommends {' '.join(pkgs)}"], "missing module"
    return rule


# npm's --before keeps the versions whose registry publish time is older than the date; a
# registry mirror that records the time it copied a package (not upstream's) has none that old
_NPM_NO_VERSIONS = re.compile(r"ENOVERSIONS|No versions available for|No matching version found for \S+ with a date before")


def _npm_drop_before(recipe: list[str], log: str) -> list[str] | None:
    """No version older than the era by the registry's publish times: resolve within the
    manifest's own version ranges, without the date."""
    if not _NPM_NO_VERSIONS.search(log) or not any(" --before=" in line for line in recipe):
        return None
    return [re.sub(r" --before=\S+", "", line) for line in recipe]


def _js_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    fixed = _npm_drop_before(recipe, log)
    if fixed is not None:
        return fixed, "drop npm --before"
    return _apt_missing(_JS_MISSING, "node-{}")(recipe, log)


# bundler could not reach its gem source (exit 17 is its HTTP error)
_GEMS_UNREACHABLE = re.compile(r"Could not fetch specs from|Could not reach host|Bundler::HTTPError|"
                               r"Gem::RemoteFetcher::FetchError|certificate verify failed|"
                               r"Network error while fetching|returned a non-zero code: 17")
# the gems the Gemfile (and the gemspec it names) declares, as Debian packages where the archive has
# them: ruby-<name> for libraries, the bare name for tools (rake, pry)
DEBIAN_GEMS = (
    "gems=$(ruby -rbundler -e 'puts Bundler::Definition.build(\"Gemfile\", nil, nil).dependencies.map(&:name)'); "
    "pkgs=; for g in $gems; do n=$(echo \"$g\" | tr A-Z_ a-z-); for p in ruby-$n $n; do "
    "if apt-cache show \"$p\" >/dev/null 2>&1; then pkgs=\"$pkgs $p\"; break; fi; done; done; "
    "echo \"gems from Debian:$pkgs\"; apt-get install -y --no-install-recommends $pkgs"
)


def _ruby_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    if _GEMS_UNREACHABLE.search(log) and "bundle install" in recipe:
        # no gem registry: the Debian archive's gems, tests run without bundler (as Debian does)
        return [DEBIAN_GEMS if line == "bundle install" else line for line in recipe], "gems from Debian"
    fixed = rules_ruby.formatter_stub(recipe, log)
    if fixed is not None:
        return fixed, rules_ruby.RULE
    return _apt_missing(_RB_MISSING, "ruby-{}")(recipe, log)


# cargo could not reach the crates registry (or the host configured none it can reach)
_CRATES_UNREACHABLE = re.compile(r"failed to get `[^`]+` as a dependency|Unable to update registry|"
                                 r"failed to (?:update|query replaced source|load source for)|"
                                 r"failed to download from|spurious network error|Couldn't resolve host")


def _debian_crates(recipe: list[str], log: str, snap: Snapshot | None) -> list[str] | None:
    """No crates registry: the declared crates from Debian's librust-*-dev packages (those the
    archive has), cargo's crates-io replaced by their directory; a lockfile's crates.io pins
    cannot hold there, so cargo may re-resolve it."""
    if snap is None or not _CRATES_UNREACHABLE.search(log) or any(DEBIAN_CRATES in line for line in recipe):
        return None
    crates = sorted({c for f in snap.files if f.rsplit("/", 1)[-1] == "Cargo.toml" and "/target/" not in f"/{f}"
                     for c in cargo_deps(snap.read(f) or "")})
    if not crates:
        return None
    wanted = " ".join(debian_crate_package(c) for c in crates)
    install = (f"pkgs=; for p in {wanted}; do if apt-cache show $p >/dev/null 2>&1; then pkgs=\"$pkgs $p\"; fi; "
               f"done; echo \"crates from Debian ({DEBIAN_CRATES}):$pkgs\"; "
               "apt-get install -y --no-install-recommends $pkgs")
    return [install, cargo_source_line(), *(line.replace(" --locked", "") for line in recipe)]


def _cargo_rules(recipe: list[str], log: str, snap: Snapshot | None = None) -> tuple[list[str], str] | None:
    if "--locked" in " ".join(recipe) and re.search(r"lock file .* needs to be updated|--locked was passed", log):
        return [line.replace(" --locked", "") for line in recipe], "stale Cargo.lock"
    fixed = _debian_crates(recipe, log, snap)
    if fixed is not None:
        return fixed, "crates from Debian"
    fixed = rules_rust.drop_unservable_dev_dependencies(recipe, log, snap)
    return (fixed, rules_rust.RULE) if fixed is not None else None


# cgo is on by default and the standard library's net, os/user, runtime/cgo use it: the
# toolchain image has no C compiler (golang-go only recommends one)
_CGO = re.compile(r'exec: "(?:gcc|cc|g\+\+)": executable file not found|cgo: C compiler "[^"]+" not found')


def _go_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    if _CGO.search(log) and not any("libc6-dev" in line for line in recipe):
        return ["apt-get install -y --no-install-recommends gcc libc6-dev"] + recipe, "cgo compiler"
    return None


RULES: dict[str, Callable[[list[str], str], tuple[list[str], str] | None]] = {
    "python": _python_rules,
    "javascript": _js_rules,
    "ruby": _ruby_rules,
    "rust": _cargo_rules,
    "java": rules_java.java_rules,
    "go": _go_rules,
    "php": rules_php.php_rules,
}


# rules that read the repository's own files too (the declared dependencies)
_WITH_SNAPSHOT = {"rust", "java", "php"}


def rule_fix(language: str, recipe: list[str], log: str, snap: Snapshot | None = None,
             toolchain: str | None = None) -> tuple[list[str], str] | None:
    """(revised recipe, rule name), or None when no rule applies; toolchain: its version (Python's
    rules pick tooling of the interpreter's era)."""
    rule = RULES.get(language)
    if rule is None:
        return None
    log = clean(log)  # Docker colours a step's stderr: escapes split uv's "published at <date>"
    if language == "python":
        return _python_rules(recipe, log, toolchain)
    return rule(recipe, log, snap) if language in _WITH_SNAPSHOT else rule(recipe, log)
