"""Build-time warming of a task image, for what its tests would otherwise fetch with the network off.

The task's own image is built unchanged; when its build context shows a need below, a layer
``FROM`` that image is built on top (network and registry trust as in every build) and is
what trials run. Each applied rule is recorded as a substitution of the check result
(``details.jsonl`` / ``summary.json``), so nothing is passed off as the task's own setup.

- ``npm-project-deps``: a ``package.json`` with dependencies in the context. Its tests run
  ``npm install`` at test time; the dependencies are installed in the image's working directory
  at build time (from npm's registry, through npm's client), so that test-time install finds
  everything in place offline (``npm_config_offline``, see ``environment.offline_env``).
- ``gradle-wrapper``: ``gradlew`` downloads a Gradle distribution and the build's JUnit/AssertJ
  come from Maven repositories; neither is a package registry reachable here. ``gradlew`` in the
  working directory is replaced by a stand-in (``swe_envs.offline.gradle``, the SWE
  environments' Gradle stand-in) that compiles ``src/main/java`` and ``src/test/java`` with
  ``javac`` against Debian's jars (JUnit 5, AssertJ) and runs the JUnit console launcher (the
  upstream script is kept as ``gradlew.upstream``). Debian's versions (JUnit 5.9, AssertJ 3.14)
  are older than the ones the build files pin.
- ``cargo-debian-crates``: a ``Cargo.toml`` that declares registry crates. No crates registry is
  reachable; Debian packages crates as ``librust-<crate>-dev`` (sources under
  ``/usr/share/cargo/registry``, with checksums), so those packages are installed and cargo's
  ``crates-io`` source is replaced by that directory (``$CARGO_HOME/config.toml``). A crate
  Debian does not package fails the layer's build with apt's message naming it. Packages come
  with their recommends: a crate's ``+default`` package carries its default features' optional
  dependencies (regex without it misses aho-corasick).
- ``cargo-add-debian-crates``: the task's tests run ``cargo add <crates>`` (Aider's Rust tasks add
  regex, thiserror and anyhow). The same Debian packages and source replacement let that resolve
  offline; a crate Debian lacks is named in the layer's log and left out, as the tests' own
  ``|| true`` tolerates. Only the tests' scripts are read: the environment never depends on the
  solution.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# shared with the SWE environments' Rust and Java rules (javac + launcher shared with the mvn stand-in)
from swe_envs.offline.crates import cargo_deps, cargo_source_line, debian_crate_package
from swe_envs.offline.gradle import GRADLEW_STANDIN

# Debian packages of the jars the stand-in puts on the class path
JAVA_TEST_PACKAGES = "junit5 libassertj-core-java"

# the build.gradle dependencies the stand-in's class path serves (group prefixes / group:artifact).
# Debian has no stand-in for the others the seeds use: its RxJava is 3 (classes in io.reactivex.rxjava3,
# the tasks import RxJava 2's io.reactivex), and libandroid-json-java's org.json throws a checked
# JSONException where org.json's is unchecked (the rest-api reference does not compile against it)
GRADLE_SERVED = ("org.junit", "org.assertj:assertj-core")


@dataclass(frozen=True)
class Warming:
    rule: str  # npm-project-deps | gradle-wrapper
    upstream: str  # what it stands in for, as the check result shows it
    local: str  # what serves it here


NPM = Warming("npm-project-deps", "npm install of the project's dependencies at test time",
              "dependencies installed at build time (npm client, registry reachable during builds)")
GRADLE = Warming("gradle-wrapper", "Gradle distribution download (gradlew) + JUnit from Maven repositories",
                 f"gradlew stand-in: javac + JUnit console launcher (Debian {JAVA_TEST_PACKAGES})")

CARGO = Warming("cargo-debian-crates", "crates from a registry (Cargo dependencies)",
                "Debian's librust-*-dev packages as cargo's crates-io source")
CARGO_ADD = Warming("cargo-add-debian-crates", "cargo add of crates at test time",
                    "Debian's librust-*-dev packages as cargo's crates-io source")


def _crates(ctx: Path) -> list[str]:
    return sorted({c for p in ctx.rglob("Cargo.toml") if not _skip(p, ctx)
                   for c in cargo_deps(p.read_text(encoding="utf-8", errors="replace"))})


# cargo add options that take a value (the value is not a crate)
_CARGO_ADD_VALUED = {"-F", "--features", "--rename", "-p", "--package", "--registry", "--target",
                     "--manifest-path", "--lockfile-path", "--branch", "--tag", "--rev", "--config", "-Z"}


def cargo_added(scripts: str) -> list[str]:
    """Registry crates ``cargo add`` names in shell scripts (``--path``/``--git`` ones are not registry's)."""
    out = set()
    for m in re.finditer(r"(?:^|[;&|(])\s*cargo add\b([^\n;&|]*)", scripts, re.MULTILINE):
        names, skip = [], False
        command = re.split(r"\s\d+[<>]|[<>#)]", m.group(1))[0]  # up to a redirection, comment or subshell end
        for w in command.split():
            if skip:
                skip = False
            elif w in ("--path", "--git"):
                names = []
                break
            elif w.startswith("-"):
                skip = w in _CARGO_ADD_VALUED
            elif re.fullmatch(r"[A-Za-z0-9_-]+(@\S+)?", w):
                names.append(w.split("@")[0])
        out.update(names)
    return sorted(out)


def test_scripts(tests_dirs: list[Path | None]) -> str:
    """The text of the tests' shell scripts: what runs at test time, offline."""
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for d in tests_dirs if d and d.is_dir() for p in sorted(d.glob("*.sh")))


def _npm_deps(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and any(data.get(k) for k in ("dependencies", "devDependencies"))


def _gradle_wrapper(path: Path) -> bool:
    return "distributionUrl" in path.read_text(encoding="utf-8", errors="replace")


def _skip(path: Path, ctx: Path) -> bool:
    return bool({"node_modules", "target"} & set(path.relative_to(ctx).parts))


def warmings(ctx: Path, tests: str = "") -> list[Warming]:
    """The rules a build context (and the text of the tests' scripts) needs, in a fixed order."""
    out = []
    if any(_npm_deps(p) for p in ctx.rglob("package.json") if not _skip(p, ctx)):
        out.append(NPM)
    if any(_gradle_wrapper(p) for p in ctx.rglob("gradle-wrapper.properties")):
        out.append(GRADLE)
    if _crates(ctx):
        out.append(CARGO)
    if cargo_added(tests):
        out.append(CARGO_ADD)
    return out


def _cargo_lines(declared: list[str], added: list[str]) -> list[str]:
    # declared crates must exist (the build needs them); added ones only where Debian packages them,
    # as the tests' `cargo add ... || true` tolerates a failed add. With recommends: +default packages
    must = " ".join(debian_crate_package(c) for c in declared)
    maybe = " ".join(debian_crate_package(c) for c in added if c not in declared)
    pick = (f'for p in {maybe}; do if apt-cache show "$p" >/dev/null 2>&1; then m="$m $p"; '
            'else echo "not packaged by Debian: $p"; fi; done && ') if maybe else ""
    return [f"RUN apt-get update && m='' && {pick}apt-get install -y {must} $m && rm -rf /var/lib/apt/lists/*",
            f"RUN {cargo_source_line()}"]


def warm_dockerfile(image: str, rules: list[Warming], ctx: Path | None = None, tests: str = "") -> str:
    """A layer on the task's image; RUN lines run in the image's own working directory."""
    lines = [f"FROM {image}"]
    for w in rules:
        if w is NPM:
            lines.append("RUN if [ -f package.json ]; then npm install --no-audit --no-fund; fi")
        elif w is GRADLE:
            # the task image may have dropped apt's lists
            lines += [f"RUN apt-get update && apt-get install -y --no-install-recommends {JAVA_TEST_PACKAGES} "
                      "&& rm -rf /var/lib/apt/lists/*",
                      "COPY gradlew-standin /opt/provision/bin/gradlew-standin",
                      "RUN chmod 755 /opt/provision/bin/gradlew-standin && if [ -f gradlew ]; then "
                      "mv gradlew gradlew.upstream && cp /opt/provision/bin/gradlew-standin gradlew; fi"]
    if CARGO in rules or CARGO_ADD in rules:  # one source replacement serves both
        lines += _cargo_lines(_crates(ctx) if ctx and CARGO in rules else [],
                              cargo_added(tests) if CARGO_ADD in rules else [])
    return "\n".join(lines) + "\n"


def warm_context(rules: list[Warming]) -> dict[str, bytes]:
    return {"gradlew-standin": GRADLEW_STANDIN.encode()} if GRADLE in rules else {}

