"""Rule-based recipe repairs: what a failed build or test collection says, and the fix it wants.

Tried before the LLM and without one, every refine round: each rule reads the failure log and
returns the revised recipe (or None when it does not apply, or its fix is already there), so
the loop keeps going for all ``refine_rounds``. The interpreter switch (a removed stdlib name
-> an older Python) is the builder's, since it changes the toolchain image (``era.older_wanted``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from swe_envs.envs import rules_java, rules_php, rules_python, rules_ruby, rules_rust
from swe_envs.envs.parsers.base import clean
from swe_envs.offline.crates import DEBIAN_CRATES, cargo_deps, cargo_source_line, debian_crate_package
from swe_envs.repos import Snapshot

# Part of every verified environment's cache key (builder): an image verified under older rules,
# parsers or collect checks is not reused once they change. Bump it with any change to what a
# recipe installs, how a run is parsed, or what the collect check accepts.
RULES_VERSION = "2026-12-01.3"

_JS_MISSING = re.compile(r"Cannot find module '([a-z0-9@][a-z0-9@/._-]*)'")
_RB_MISSING = re.compile(r"cannot load such file -- ([a-z0-9_-]+)")


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
    "python": rules_python.python_rules,
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
        return rules_python.python_rules(recipe, log, toolchain)
    return rule(recipe, log, snap) if language in _WITH_SNAPSHOT else rule(recipe, log)
