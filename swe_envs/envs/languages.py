"""The 9 languages: detection, install recipe from the repo's manifest, test command.

A *recipe* is the list of shell commands that turn the toolchain image plus the repository
(copied to /testbed) into a working environment; each becomes one ``RUN`` line, so a build
log names the step that failed. The test command is a shell script run in /testbed; the
runner it names picks the log parser. Recipes install from the repo's own manifest
(requirements/pyproject, package.json, pom.xml/gradle, go.mod, Cargo.toml, CMake/Make,
composer.json, Gemfile); without third-party dependencies they need no network at all.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from dataclasses import dataclass

from swe_envs.envs import project_files
from swe_envs.repos import Snapshot

EXTENSIONS = {
    "python": (".py",),
    "javascript": (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx"),
    "java": (".java", ".kt"),
    "go": (".go",),
    "rust": (".rs",),
    "c": (".c",),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "php": (".php",),
    "ruby": (".rb",),
}
MANIFESTS = {  # strong evidence, checked at the repository root first
    "rust": ("Cargo.toml",),
    "go": ("go.mod",),
    "javascript": ("package.json",),
    "java": ("pom.xml", "build.gradle", "build.gradle.kts"),
    "php": ("composer.json",),
    "ruby": ("Gemfile", ".rspec"),
    "python": ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt"),
}


def detect_language(snap: Snapshot) -> str | None:
    """Root manifest first (C/C++ by CMake/Make + sources), then the most common source extension.
    Among several root manifests, the language with the most source files: a Python project's
    package.json for its JavaScript tooling (sphinx's karma tests) does not make it JavaScript."""
    counts: Counter = Counter()
    for f in snap.files:
        for lang, exts in EXTENSIONS.items():
            if f.endswith(exts):
                counts[lang] += 1
    found = [lang for lang, names in MANIFESTS.items() if any(snap.has(n) for n in names)]
    if found:
        return max(found, key=lambda lang: (counts[lang], -found.index(lang)))
    if snap.has("CMakeLists.txt") or snap.has("Makefile") or snap.has("meson.build"):
        return "cpp" if counts["cpp"] >= counts["c"] and counts["cpp"] else "c"
    return counts.most_common(1)[0][0] if counts else None


@dataclass
class TestPlan:
    command: str  # shell script run in /testbed
    runner: str  # log parser name


def _q(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


# -- recipes -----------------------------------------------------------------------------------
@dataclass
class RecipeOptions:
    """What a recipe needs beyond the files: the era cut-off and the repo-version's version."""

    exclude_newer: str | None = None  # ISO date: nothing released later is installed
    version: str | None = None  # the task's version (SWE-bench ``version``), for setuptools-scm


def recipe(language: str, snap: Snapshot, opts: RecipeOptions | None = None) -> list[str]:
    return _RECIPES[language](snap, opts or RecipeOptions())


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


def uv_install(opts: RecipeOptions) -> str:
    # a timestamp at the end of the day: releases of that day count as available
    if not opts.exclude_newer:
        return UV_PIP
    cmd = f"{UV_PIP} --exclude-newer {opts.exclude_newer}T23:59:59Z"
    if opts.exclude_newer < EDITABLE_SETUPTOOLS:
        cmd += "".join(f" --exclude-newer-package {tool}={EDITABLE_SETUPTOOLS}" for tool in BUILD_TOOLS)
    return cmd


def scm_version(version: str | None) -> str:
    """A PEP 440 version for setuptools-scm, which cannot read one from an exported tree."""
    parts = re.findall(r"\d+", version or "")
    return ".".join((parts + ["0", "0", "0"])[:3]) if parts else "0.0.0"


# the requirements of the distribution installed from /testbed (its metadata, markers kept)
_TESTBED_REQUIRES = (
    "python -c 'import importlib.metadata as m, json; print(\"\\n\".join(r for d in m.distributions() "
    "if json.loads(d.read_text(\"direct_url.json\") or \"{}\").get(\"url\") == \"file:///testbed\" "
    "for r in (d.requires or [])))' > /tmp/swe-requires.txt"
)


def editable_with_version(editable: str, version: str) -> list[str]:
    """setuptools-scm cannot read a version from an exported tree, so the project gets a pretend
    one. The variable must not reach the builds of its dependencies: an sdist that uses
    setuptools-scm too would get the project's version as its own, the resolver would reject it
    and fall back to an ancient release (iniconfig 1.0.0 -> 0.1 for pytest 5.4/6.0, whose ini
    parser then breaks pytest's own ini tests). So the project is installed alone with the
    variable, then its requirements, with the same resolver options, without it."""
    return [f"SETUPTOOLS_SCM_PRETEND_VERSION={version} {editable.replace(' -e .', ' --no-deps -e .')}",
            _TESTBED_REQUIRES,
            f"if [ -s /tmp/swe-requires.txt ]; then {editable.replace(' -e .', ' -r /tmp/swe-requires.txt')}; fi"]


def _python_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    uv = uv_install(opts)
    # runtime pins, then the test pins; a dev file (docs, linters, ...) only when no test file exists
    reqs = [r for r in ("requirements.txt",) if snap.has(r)]
    tests = [r for r in PY_TEST_REQUIREMENTS if snap.has(r)][:1]
    reqs += tests or [r for r in PY_DEV_REQUIREMENTS if snap.has(r)][:1]
    cmds = [f"{uv} -r {req}" for req in reqs]
    build_files = "\n".join(snap.read(n) or "" for n in ("setup.py", "setup.cfg", "pyproject.toml"))
    if any(snap.has(n) for n in ("pyproject.toml", "setup.py", "setup.cfg")):
        # setuptools-scm reads the version from git metadata, which an exported tree lacks
        editable = f"{uv} -e ."
        if re.search(r"setuptools[_-]scm", build_files):
            cmds += editable_with_version(editable, scm_version(opts.version))
        else:
            cmds.append(editable)
    # the era's pytest, unless the repository's own requirements (or the repository) gave one
    cmds.append(f"python -c 'import pytest' 2>/dev/null || {uv} pytest")
    cmds.append("uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt")
    return cmds


def _package_json(snap: Snapshot) -> dict:
    try:
        data = json.loads(snap.read("package.json") or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _js_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    pkg = _package_json(snap)
    if pkg.get("dependencies") or pkg.get("devDependencies"):
        install = "npm ci" if snap.has("package-lock.json") else "npm install"
        # without a lockfile, the era's releases (a lockfile pins them already)
        before = f" --before={opts.exclude_newer}" if opts.exclude_newer and install == "npm install" else ""
        return ["apt-get install -y --no-install-recommends npm", f"{install} --no-audit --no-fund{before}"]
    return []


DEBIAN_MAVEN = "maven libsurefire-java libmaven-compiler-plugin-java libmaven-resources-plugin-java"
# "central" served from Debian's repository; it has no checksum files, so don't ask for them
_DEB_REPO = ("<id>central</id><url>file:///usr/share/maven-repo</url><releases><checksumPolicy>ignore"
             "</checksumPolicy></releases><snapshots><enabled>false</enabled></snapshots>")
MAVEN_SETTINGS = (f"<settings><profiles><profile><id>debian</id><repositories><repository>{_DEB_REPO}</repository>"
                  f"</repositories><pluginRepositories><pluginRepository>{_DEB_REPO}</pluginRepository>"
                  "</pluginRepositories></profile></profiles><activeProfiles><activeProfile>debian</activeProfile>"
                  "</activeProfiles></settings>")
MVN = ('S=""; [ -f /home/swe/.m2/settings.xml ] && S="-s /home/swe/.m2/settings.xml"; '
       "mvn -B -ntp $S -Dmaven.repo.local=/home/swe/.m2/repository")
# Maven and Gradle name only failing tests on the console: print the XML reports after the run
_PRINT_REPORTS = ('rc=$?; for f in $(find . -path "*/{dir}/TEST-*.xml" | sort); do '
                  'echo "----- JUnit XML report: $f"; cat "$f"; echo; done; exit $rc')


def _java_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("pom.xml"):
        return [f"command -v mvn >/dev/null || apt-get install -y --no-install-recommends {DEBIAN_MAVEN}",
                # Debian's maven-repo serves every packaged plugin offline: mirror everything to it
                f"if [ -d /usr/share/maven-repo ]; then mkdir -p /home/swe/.m2 && printf '%s' '{MAVEN_SETTINGS}' "
                "> /home/swe/.m2/settings.xml; fi",
                # a full test run resolves the test providers too; failing tests don't fail the build
                f"{MVN} -q test -Dmaven.test.failure.ignore=true"]
    if snap.has("gradlew"):
        return ["chmod +x gradlew && ./gradlew --no-daemon testClasses"]
    if snap.has("build.gradle") or snap.has("build.gradle.kts"):
        return ["apt-get install -y --no-install-recommends gradle", "gradle --no-daemon testClasses"]
    return []  # plain source layout: javac + the JUnit console launcher at test time


def _go_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    cmds = ["go mod download"] if snap.has("go.sum") else []
    if not snap.has("go.mod"):
        # module mode needs a go.mod; the tests import the package by its import path
        cmds.append(f"go mod init {shlex.quote(project_files.go_module_path(snap))}")
    # compiling the tests once fills the build cache, so each run only rebuilds what a patch touches
    return cmds + ["go test -count=1 -run '^$' ./..."]


def _rust_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    # a committed lockfile is the era's resolution: keep it exactly
    return ["cargo test --no-run" + (" --locked" if snap.has("Cargo.lock") else "")]


def _native_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("CMakeLists.txt"):
        return [f"cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug{project_files.cmake_test_options(snap)}", "cmake --build build -j2"]
    if snap.has("meson.build"):
        return ["apt-get install -y --no-install-recommends meson ninja-build", "meson setup build"]
    if snap.has("configure"):
        return ["./configure", "make -j2"]
    if snap.has("Makefile"):
        return ["make -j2"]
    return []


def _php_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if project_files.php_needs_install(snap):
        return ["apt-get install -y --no-install-recommends composer", "composer install --no-interaction"]
    comp = project_files.composer(snap)
    if comp.get("autoload") or comp.get("autoload-dev"):
        # phpunit's bootstrap is vendor/autoload.php: composer writes it from composer.json, offline;
        # --dev: with no install to infer it from, composer leaves autoload-dev (the tests' classes) out
        return ["apt-get install -y --no-install-recommends composer", "composer dump-autoload --dev --no-interaction"]
    return []


def _ruby_recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("Gemfile"):
        return ["apt-get install -y --no-install-recommends ruby-bundler", "bundle install"]
    return []


_RECIPES = {
    "python": _python_recipe,
    "javascript": _js_recipe,
    "java": _java_recipe,
    "go": _go_recipe,
    "rust": _rust_recipe,
    "c": _native_recipe,
    "cpp": _native_recipe,
    "php": _php_recipe,
    "ruby": _ruby_recipe,
}


# -- test commands -----------------------------------------------------------------------------
def test_plan(language: str, snap: Snapshot, selected: list[str] | None = None) -> TestPlan:
    """How to run the tests; ``selected`` = test files a patch touches (used where it is safe)."""
    return _PLANS[language](snap, selected or [])


def _python_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    files = [p for p in selected if p.endswith(".py") and p.rsplit("/", 1)[-1] != "conftest.py"
             and not project_files.ignored_by_conftest(snap, p)]
    names = [p.rsplit("/", 1)[-1] for p in snap.files if p.endswith(".py")]
    if not files and not any(n.startswith("test_") or n.endswith("_test.py") for n in names):
        # tests only in files pytest does not collect by default (itsdangerous 0.24's tests.py): named
        files = [p for p in snap.files if p.rsplit("/", 1)[-1] in ("tests.py", "test.py")]
    cmd = "python -m pytest -rA -v -p no:cacheprovider --tb=short --color=no"
    installed = any(snap.has(n) for n in ("pyproject.toml", "setup.py", "setup.cfg"))
    if not installed and any(f.startswith("src/") and f.endswith(".py") for f in snap.files):
        cmd = "PYTHONPATH=/testbed/src${PYTHONPATH:+:$PYTHONPATH} " + cmd  # src layout, nothing installs it
    # test ids as SWE-bench's harness writes them, so F2P/P2P compare with its datasets
    return TestPlan(f"{cmd} {_q(files)}".strip(), "pytest-swebench")


def _js_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    scripts = _package_json(snap).get("scripts") or {}
    script = project_files.npm_test_script(scripts) if isinstance(scripts, dict) else ""
    if not script or "no test specified" in script:
        return TestPlan("node --test", "tap")
    runner = "tap"
    for name in ("jest", "vitest", "mocha"):
        if re.search(rf"(^|[\s/]){name}\b", script):
            runner = name
    if runner == "jest" and "--verbose" not in script:
        script += " --verbose"  # without it jest lists passing tests only for a single file
    if runner == "tap" and re.search(r"(^|[\s;&|(])ava\b(?![-.])", script) and "--tap" not in script:
        # ava's own reporter names failures only; its TAP reporter names every test
        script = re.sub(r"(^|[\s;&|(])ava\b(?![-.])", r"\1ava --tap", script)
    if runner in ("mocha", "jest"):
        script = re.sub(r"\s--bail\b", "", script)  # every test's outcome, not up to the first failure
    prefix = "PATH=/testbed/node_modules/.bin:$PATH; "
    if runner == "mocha":
        # old mocha's `mocha` spawns `_mocha` with customFds, which Node dropped long ago: the run
        # printed nothing. `_mocha` is the runner itself, same arguments
        prefix += ('mocha() { if grep -qs customFds /testbed/node_modules/mocha/bin/mocha; then _mocha "$@"; '
                   'else command mocha "$@"; fi; }; ')
    # what `npm test` does, without needing npm in the image
    return TestPlan(prefix + script, runner)


JUNIT_JARS = "/usr/share/java/junit-platform-console-standalone.jar:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"
_JAVAC_TEMPLATE = """rm -rf /tmp/swe-java /tmp/swe-reports; mkdir -p /tmp/swe-java/main /tmp/swe-java/test /tmp/swe-reports
CP="{jars}$(find . -path '*/lib/*.jar' -printf ':%p')"
MAIN=$(find {main} -name '*.java' 2>/dev/null | grep -v -E '{test_re}')
TESTS=$(find {tests} -name '*.java' 2>/dev/null)
if [ -n "$MAIN" ]; then javac -nowarn -encoding UTF-8 -d /tmp/swe-java/main -cp "$CP" $MAIN || exit 3; fi
javac -nowarn -encoding UTF-8 -d /tmp/swe-java/test -cp "/tmp/swe-java/main:$CP" $TESTS || exit 3
java -jar /usr/share/java/junit-platform-console-standalone.jar --disable-banner --disable-ansi-colors --details=tree \\
  --class-path "/tmp/swe-java/test:/tmp/swe-java/main:$CP" --scan-class-path --reports-dir /tmp/swe-reports
rc=$?
for f in /tmp/swe-reports/*.xml; do echo "----- JUnit XML report: $f"; cat "$f"; echo; done
exit $rc"""


def _java_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if snap.has("pom.xml"):
        return TestPlan(f"{MVN} test\n" + _PRINT_REPORTS.format(dir="surefire-reports"), "surefire")
    if snap.has("gradlew") or snap.has("build.gradle") or snap.has("build.gradle.kts"):
        exe = "./gradlew" if snap.has("gradlew") else "gradle"
        return TestPlan(f"{exe} --no-daemon test --continue --console=plain\n"
                        + _PRINT_REPORTS.format(dir="test-results/test"), "gradle")
    dirs = {f.split("/", 1)[0] for f in snap.files if "/" in f}
    main = "src/main/java" if any(f.startswith("src/main/java/") for f in snap.files) else "src"
    if any(f.startswith("src/test/java/") for f in snap.files):
        tests = "src/test/java"
    else:
        tests = " ".join(d for d in ("test", "tests") if d in dirs) or "src"
    cmd = _JAVAC_TEMPLATE.format(jars=JUNIT_JARS, main=main, tests=tests, test_re="/(test|tests)/|Test\\.java$")
    return TestPlan(cmd, "junit-xml")


def _go_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    pkgs = sorted({"./" + p.rsplit("/", 1)[0] if "/" in p else "." for p in selected if p.endswith("_test.go")})
    return TestPlan(f"go test -v -count=1 {' '.join(pkgs) or './...'}", "go-test")


def _rust_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    return TestPlan("cargo test --no-fail-fast", "cargo")


def _native_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if snap.has("CMakeLists.txt"):
        return TestPlan("cmake --build build -j2 && ctest --test-dir build -V --timeout 300", "ctest")
    if snap.has("meson.build"):
        return TestPlan("meson test -C build -v", "meson")
    makefile = snap.read("Makefile") or ""
    target = "check" if re.search(r"^check\s*:", makefile, re.M) else "test"
    return TestPlan(f"make -j2 && make {target}", "auto")


def _php_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    exe = "vendor/bin/phpunit" if project_files.php_needs_install(snap) else "phpunit"
    config = snap.read("phpunit.xml") or snap.read("phpunit.xml.dist") or ""
    where = " " + ("tests" if any(f.startswith("tests/") for f in snap.files) else "test")
    if "<testsuites" in config:
        where = ""
    elif m := re.search(r"<testsuite\b.*?<directory[^>]*>\s*([^<\s]+)", config, re.S):
        where = " " + shlex.quote(m.group(1))  # a lone <testsuite> (PHPUnit < 6 form): PHPUnit 9 ignores it
    # TeamCity messages name every test, passing ones too (the default output lists failures only)
    return TestPlan(f"{exe} --teamcity{where}", "phpunit")


def _ruby_plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if any(f.startswith("spec/") for f in snap.files) or snap.has(".rspec"):
        files = [p for p in selected if p.endswith("_spec.rb")]
        rspec = f"rspec --format documentation --no-color {_q(files)}".strip()
        if snap.has("Gemfile"):
            # the bundle when it is complete; else the gems installed system-wide (Debian's, when
            # no gem registry was reachable), as Debian runs a gem's tests without bundler
            rspec = f"if bundle check >/dev/null 2>&1; then bundle exec {rspec}; else {rspec}; fi"
        return TestPlan(rspec, "rspec")
    loader = 'Dir.glob("test/**/{*_test,test_*}.rb").sort.each { |f| require File.expand_path(f) }'
    # the same loader serves minitest and test-unit (Ruby's bundled test/unit); their -v differ
    tests = [f for f in snap.files if f.startswith("test/") and f.endswith(".rb")][:50]
    test_unit = any(re.search(r"require\s*\(?\s*['\"]test/unit['\"]|Test::Unit::TestCase", snap.read(f) or "")
                    for f in tests)
    return TestPlan(f"ruby -Ilib -Itest -e {shlex.quote(loader)} -- -v", "test-unit" if test_unit else "minitest")


_PLANS = {
    "python": _python_plan,
    "javascript": _js_plan,
    "java": _java_plan,
    "go": _go_plan,
    "rust": _rust_plan,
    "c": _native_plan,
    "cpp": _native_plan,
    "php": _php_plan,
    "ruby": _ruby_plan,
}
