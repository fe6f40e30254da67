"""Gradle without Gradle: the build files' dependencies from Debian, the tests run by a stand-in.

A Gradle build fetches a Gradle distribution (``gradlew``) and its plugins and dependencies from
Maven repositories; none is reachable here, and Debian's own ``gradle`` (4.4) resolves from the
same repositories. As for Maven (``swe_envs.offline.maven``), the tree stays as it is and a stand-in takes
the build tool's place: it compiles each project's ``src/main/java`` and ``src/test/java`` with
javac against Debian's jars (the projects it depends on first) and runs the JUnit console
launcher, writing the XML reports where Gradle writes them (``<project>/build/test-results/test``)
and the reports' totals in the form of Gradle's ``N tests completed, M failed, K skipped``. The
javac + launcher part is the Maven stand-in's (``maven.JUNIT_RUN``), test sources that
need an unavailable package are left out the same way (listed, at most a quarter).

Used by the SWE environments (a recorded rule, after the Gradle route failed) and by the
terminal tasks' warm layer (``swe_envs.terminal.warm``: ``gradlew`` replaced in the task image).
"""

from __future__ import annotations

import re
import shlex

from swe_envs.offline import maven
from swe_envs.repos import Snapshot

# Gradle's failures to get a distribution, a plugin or a dependency offline, or no Gradle that
# runs the build here at all: Debian's Gradle 4.4 predates the JDKs the images have and the DSL of
# newer build scripts (hamcrest 2.2's settings.gradle: "Could not find method enableFeaturePreview()")
UNRESOLVABLE = re.compile(r"Could not resolve (?:all (?:files|dependencies)|[\w.-]+:[\w.-]+)|"
                          r"Could not (?:GET|HEAD|download) |Plugin \[id: '[^']+'.*\] was not found|"
                          r"UnknownHostException|Could not find [\w.-]+:[\w.-]+:|"
                          r"Exception in thread \"main\" java\.net\.|gradle(?:w)?: (?:command )?not found|"
                          r"Could not determine java version|Plugin with id '[^']+' not found|"
                          r"Could not initialize class org\.codehaus\.groovy|Unsupported class file major version|"
                          r"Unable to locate package gradle|Could not find method \w+\(\) for arguments|"
                          r"Minimum supported Gradle version|Gradle [\d.]+ (?:or (?:later|newer) )?is required")

# The script is a recipe line (and a file of the terminal tasks' warm layer), so its text is part of
# every environment key: kept byte for byte, its comments still name the module as it was then called.
GRADLEW_STANDIN = r"""#!/bin/sh
# Gradle stand-in (swe_envs.envs.gradle_offline): no Gradle distribution or Maven repository is
# reachable offline. javac + the JUnit console launcher over Debian's jars, per project (the
# projects it depends on compiled first); an upstream wrapper is kept as ./gradlew.upstream.
who="gradlew stand-in"
release=""  # the build's Java level (javac --release), if it declares one
include=".*"  # Gradle runs every class that has tests, whatever its name
exclude=""
maxleft=25  # test sources left out for unavailable packages: at most this percentage
projects="."  # "dir=dep,dep": each project with tests and the projects it needs, those first
task=""
for a in "$@"; do
  case "$a" in
    test|check|build) task=test;;
    testClasses|compileTestJava) [ "$task" = test ] || task=compile;;
    compileJava|classes|assemble|jar) [ -n "$task" ] || task=main;;
    clean|--*|-*) ;;
    *) echo "gradlew stand-in: task '$a' is not supported (test, check, build, classes)" >&2; exit 2;;
  esac
done
[ -n "$task" ] || { echo "gradlew stand-in: no task given (test, check, build, classes)" >&2; exit 2; }
echo "gradlew stand-in: javac + JUnit console launcher from Debian packages (no Gradle offline)"
""" + maven.JUNIT_RUN + r"""
top=$(pwd); rc=0; done_=0; failed=0; skipped=0
for entry in $projects; do
  dir=${entry%%=*}; deps=""; [ "$entry" = "$dir" ] || deps=$(echo "${entry#*=}" | tr , ' ')
  extra=""
  for d in $deps; do
    junit_run "$d" build/gradlew-standin-main "" "${extra#:}" main || { rc=1; continue 2; }
    extra="$extra:$top/$d/build/gradlew-standin-main/main"
  done
  echo "> Task :$dir:$task"
  junit_run "$dir" build/gradlew-standin build/test-results/test "${extra#:}" "$task" || rc=1
  [ "$task" = test ] || continue
  set -- $(junit_totals "$dir/build/test-results/test")
  [ "$1" = - ] && continue
  done_=$(( done_ + $1 )); failed=$(( failed + $2 + $3 )); skipped=$(( skipped + $4 ))
done
if [ "$task" = test ]; then
  # the reports' totals in Gradle's words (an aborted test, a failed assumption, is skipped)
  echo "$done_ tests completed, $failed failed, $skipped skipped"
  [ "$done_" -gt 0 ] || { echo "gradlew stand-in: no test ran" >&2; rc=1; }
fi
[ $rc = 0 ] && echo "BUILD SUCCESSFUL" || echo "BUILD FAILED"
exit $rc
"""

_DEP = re.compile(r"^\s*(?:implementation|testImplementation|api|compileOnly|runtimeOnly|testRuntimeOnly|"
                  r"compile|testCompile|testCompileOnly)\b[\s(]*(?:platform\()?[\"']([^:\"']+):([^:\"']+)", re.M)
# map notation: testImplementation(group: 'junit', name: 'junit', version: '4.12')
_DEP_MAP = re.compile(r"\bgroup\s*:\s*[\"']([^\"']+)[\"']\s*,\s*name\s*:\s*[\"']([^\"']+)[\"']")
_PROJECT_DEP = re.compile(r"\bproject\(\s*(?:path\s*:\s*)?[\"']:?([^\"']+)[\"']")
_INCLUDE = re.compile(r"^\s*include\b\s*\(?((?:\s*[\"'][^\"']+[\"']\s*,?)+)", re.M)


def gradle_deps(text: str) -> list[str]:
    """``group:artifact`` of the dependencies a build.gradle declares (string and map notation)."""
    return sorted({f"{g}:{a}" for g, a in _DEP.findall(text) + _DEP_MAP.findall(text)})


def _build_files(snap: Snapshot, folder: str) -> str:
    """The text of a project's build scripts (``build.gradle``, or a renamed ``<name>.gradle``)."""
    prefix = f"{folder}/" if folder != "." else ""
    names = [f for f in snap.files if f.startswith(prefix) and "/" not in f[len(prefix):]
             and f.endswith((".gradle", ".gradle.kts")) and not f[len(prefix):].startswith("settings.")]
    return "\n".join(snap.read(f) or "" for f in sorted(names))


def projects(snap: Snapshot) -> list[tuple[str, list[str]]]:
    """(project folder, the project folders it depends on, transitively, dependencies first) for
    each project of the build that has tests: ``settings.gradle``'s includes (``:a:b`` -> ``a/b``)
    and the root project."""
    settings = (snap.read("settings.gradle") or "") + (snap.read("settings.gradle.kts") or "")
    folders = ["."] + [name.strip(":").replace(":", "/") for group in _INCLUDE.findall(settings)
                       for name in re.findall(r"[\"']([^\"']+)[\"']", group)]
    needs = {f: [p.strip(":").replace(":", "/") for p in _PROJECT_DEP.findall(_build_files(snap, f))]
             for f in folders}

    def closure(folder: str, seen: tuple[str, ...] = ()) -> list[str]:
        out: list[str] = []
        for dep in needs.get(folder, []):
            if dep not in seen and dep != folder:
                out += [d for d in closure(dep, seen + (folder,)) + [dep] if d not in out]
        return out

    with_tests = [f for f in folders if any(p.startswith("src/test/java/" if f == "." else f"{f}/src/test/java/")
                                            for p in snap.files)]
    return [(f, closure(f)) for f in with_tests]


# sourceCompatibility = JavaVersion.VERSION_1_7 / '1.8' / 11 (in any of the build's scripts)
_LEVEL = re.compile(r"\bsourceCompatibility\s*=\s*(?:JavaVersion\.VERSION_|[\"']?)(?:1[._])?(\d+)")


def java_level(snap: Snapshot) -> int | None:
    """The Java level the build's scripts declare: javac compiles for it, the way Gradle's
    compileJava does (hamcrest 2.2 declares 1.7, and its sources do not compile under Java 8's
    type inference)."""
    for f in sorted(snap.files):
        if f.endswith((".gradle", ".gradle.kts")) and (m := _LEVEL.search(snap.read(f) or "")):
            return int(m.group(1))
    return maven.java_level(snap)


def standin_script(snap: Snapshot) -> str:
    """The stand-in for this tree: its projects and the Java level its build declares (at least 7,
    the oldest today's javac compiles for)."""
    table = " ".join(f"{f}={','.join(deps)}" if deps else f for f, deps in projects(snap)) or "."
    script = GRADLEW_STANDIN.replace('projects="."', f"projects={shlex.quote(table)}", 1)
    level = java_level(snap)
    return script.replace('release=""', f'release="{max(level, 7)}"', 1) if level else script


def standin_recipe(snap: Snapshot) -> list[str]:
    """Debian's jars for the build files' dependencies, the stand-in as ``gradle`` (and as
    ``./gradlew``, the upstream wrapper kept as ``gradlew.upstream``), a compile that fails the build
    when the jars fall short, and the resolved set (jars' packages, test sources left out)."""
    text = "\n".join(snap.read(f) or "" for f in snap.files if f.endswith((".gradle", ".gradle.kts")))
    wanted = list(maven.STANDIN_PACKAGES)
    for dep in gradle_deps(text):
        wanted += maven.debian_package(*dep.split(":", 1))
    names = " ".join(dict.fromkeys(wanted))
    install = (f"pkgs=; for p in {names}; do if apt-cache show $p >/dev/null 2>&1; then pkgs=\"$pkgs $p\"; fi; "
               "done; echo \"jars from Debian:$pkgs\"; apt-get install -y --no-install-recommends $pkgs")
    lines = " ".join("'" + line.replace("'", "'\\''") + "'" for line in standin_script(snap).splitlines())
    write = (f"printf '%s\\n' {lines} > /usr/local/bin/gradle && chmod 755 /usr/local/bin/gradle && "
             "if [ -f gradlew ]; then mv gradlew gradlew.upstream && cp /usr/local/bin/gradle gradlew; fi")
    record = (f"gradle testClasses && {{ dpkg-query -W -f '${{Package}}=${{Version}}\\n' {names} 2>/dev/null; "
              "for f in $(find . -path '*/build/gradlew-standin/left-out.txt' | sort); do "
              "sed \"s|^|left out: ${f%/build/*}/|\" \"$f\"; done; } > /opt/swe-resolved.txt")
    return [install, write, record]
