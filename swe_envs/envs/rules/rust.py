"""Rust: a stale Cargo.lock; no crates registry -> the declared crates from Debian; then
dev-dependencies that Debian's crates cannot serve, dropped as debcargo does.

After the "crates from Debian" rule (no crates registry: cargo's crates-io replaced by the
``librust-*-dev`` directory), a dev-dependency Debian does not package at a matching version
(``criterion`` 0.3 in bookworm, say) stops the whole build, although only a benchmark uses it.
Debian's own packages patch such dev-dependencies out; this rule does the same, generally: cargo
itself is asked (``cargo generate-lockfile --offline``) which crate it cannot resolve, and while
that crate is a dev-dependency of a manifest in the tree, its entry is commented out of the
manifest together with the benches, examples and integration tests that use it (their files
removed, their ``[[bench]]``/``[[example]]``/``[[test]]`` sections commented out). The library and
binaries are never touched: a unit test that needs the crate still fails the build, as it should.
The crates dropped are written to the build log and to the environment's resolved set
(``/opt/swe-resolved.txt``), with Cargo.lock's resolved crates.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field

from swe_envs.offline.crates import DEBIAN_CRATES, cargo_deps, cargo_source_line, debian_crate_package
from swe_envs.repos import Snapshot

RULE = "dev-dependencies Debian lacks"
MARK = ": drop the dev-dependencies that the Debian crates cannot serve"
# cargo's resolver could not satisfy a requirement (missing crate, version or feature)
UNRESOLVED = re.compile(r"no matching package named|failed to select a version for|"
                        r"does not have these features|candidate versions found which didn't match")
_DEV_TABLES = ("dev-dependencies", "dev_dependencies")
_TARGET_DIRS = {"bench": "benches", "test": "tests", "example": "examples"}
_HEADER = re.compile(r"^\s*\[(\[?)\s*(.+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*[.=]""")
_PART = re.compile(r"""\s*(?:"((?:\\.|[^"\\])*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.|$)""")


@dataclass
class Drop:
    """What dropping one dev-dependency crate does to the tree."""

    crate: str  # the package name cargo reports
    names: set[str] = field(default_factory=set)  # the names it is declared under (aliases)
    lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # manifest -> 1-based line ranges
    files: set[str] = field(default_factory=set)  # target sources that use it
    targets: list[str] = field(default_factory=list)  # "[[bench]] hex", for the record


def _key_path(header: str) -> list[str]:
    parts, pos = [], 0
    while pos < len(header):
        m = _PART.match(header, pos)
        if not m or m.end() == pos:
            return []
        parts.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return parts


def _dev_table(parts: list[str]) -> int | None:
    """Where a header's key path names a dev-dependencies table ([dev-dependencies...] or
    [target.X.dev-dependencies...]); None when it does not."""
    if parts[:1] and parts[0] in _DEV_TABLES:
        return 0
    if len(parts) >= 3 and parts[0] == "target" and parts[2] in _DEV_TABLES:
        return 2
    return None


def _value_end(lines: list[str], i: int) -> int:
    """The last line of a key's value: inline tables and arrays may span lines."""
    depth = 0
    for j in range(i, len(lines)):
        text = re.sub(r'"(?:\\.|[^"\\])*"|\'[^\']*\'|#.*$', "", lines[j])
        depth += text.count("[") + text.count("{") - text.count("]") - text.count("}")
        if depth <= 0:
            return j
    return len(lines) - 1


def _manifest_entries(text: str) -> tuple[dict[str, list[tuple[int, int]]], list[tuple[str, int, int]]]:
    """(dev-dependency name -> its line ranges, [(target kind, header line, last line)] for each
    [[bench]]/[[test]]/[[example]] section in order), 0-based."""
    lines = text.splitlines()
    entries: dict[str, list[tuple[int, int]]] = {}
    sections: list[tuple[str, int, int]] = []
    headers = [(i, m) for i, line in enumerate(lines) if (m := _HEADER.match(line))]
    for k, (i, m) in enumerate(headers):
        end = (headers[k + 1][0] if k + 1 < len(headers) else len(lines)) - 1
        parts = _key_path(m.group(2))
        if m.group(1) and len(parts) == 1 and parts[0] in _TARGET_DIRS:
            sections.append((parts[0], i, end))
            continue
        at = _dev_table(parts) if parts else None
        if at is None:
            continue
        if len(parts) > at + 1:  # [dev-dependencies.NAME]: the whole table
            entries.setdefault(parts[at + 1], []).append((i, end))
            continue
        j = i + 1
        while j <= end:  # [dev-dependencies]: one key (and its value's lines) per crate
            km = _KEY.match(lines[j])
            if km:
                last = _value_end(lines, j) if "=" in lines[j] else j
                entries.setdefault(next(g for g in km.groups() if g is not None), []).append((j, last))
                j = last
            j += 1
    return entries, sections


def _declared(data: dict) -> tuple[dict[str, str], set[str]]:
    """(dev-dependency name -> package name, names that are normal or build dependencies)."""
    dev, normal = {}, set()
    scopes = [data] + [t for t in (data.get("target") or {}).values() if isinstance(t, dict)]
    for scope in scopes:
        for table in _DEV_TABLES:
            for name, spec in (scope.get(table) or {}).items():
                if not (isinstance(spec, dict) and ("path" in spec or "git" in spec)):
                    dev[name] = spec.get("package", name) if isinstance(spec, dict) else name
        for table in ("dependencies", "build-dependencies", "build_dependencies"):
            normal |= set(scope.get(table) or {})
    return dev, normal


def _uses(text: str, ident: str) -> bool:
    i = re.escape(ident)
    return re.search(rf"(?<![\w:]){i}::|\bextern\s+crate\s+{i}\b|\buse\s+{i}\b", text) is not None


def _target_files(snap: Snapshot, root: str, data: dict) -> dict[str, tuple[str, int | None]]:
    """Each bench/test/example target's sources: root file -> (kind, index of its section or None)."""
    out: dict[str, tuple[str, int | None]] = {}
    for kind, folder in _TARGET_DIRS.items():
        for n, spec in enumerate(data.get(kind) or []):
            if not isinstance(spec, dict):
                continue
            path = spec.get("path") or next(
                (p for p in (f"{folder}/{spec.get('name')}.rs", f"{folder}/{spec.get('name')}/main.rs")
                 if snap.has(root + p)), f"{folder}/{spec.get('name')}.rs")
            out[root + path] = (kind, n)
        for f in snap.files:  # cargo's auto-discovered targets
            rel = f[len(root):] if f.startswith(root) else None
            if rel and re.fullmatch(rf"{folder}/[^/]+\.rs|{folder}/[^/]+/main\.rs", rel) and f not in out:
                out[f] = (kind, None)
    return out


def _sources(snap: Snapshot, main: str) -> list[str]:
    """A target's root file, and the files of its own directory (``benches/x/main.rs``) or the
    modules it declares beside it (``mod common;``)."""
    here = main.rsplit("/", 1)[0]
    if main.endswith("/main.rs") and here.count("/") >= 1:
        return [f for f in snap.files if f.startswith(here + "/") and f.endswith(".rs")]
    text = snap.read(main) or ""
    mods = re.findall(r"^\s*(?:pub\s+)?mod\s+([A-Za-z0-9_]+)\s*;", text, re.M)
    return [main] + [p for m in mods for p in (f"{here}/{m}.rs", f"{here}/{m}/mod.rs") if snap.has(p)]


def dev_dependency_drops(snap: Snapshot) -> dict[str, Drop]:
    """For every crate declared only as a dev-dependency somewhere in the tree: what dropping it
    changes (manifest lines to comment out, target files to remove)."""
    drops: dict[str, Drop] = {}
    for manifest in sorted(f for f in snap.files if f.rsplit("/", 1)[-1] == "Cargo.toml"
                           and "/target/" not in f"/{f}"):
        text = snap.read(manifest) or ""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        root = manifest[: -len("Cargo.toml")]
        dev, normal = _declared(data)
        entries, sections = _manifest_entries(text)
        targets = _target_files(snap, root, data)
        section_at = {}
        for kind in _TARGET_DIRS:
            for n, (_, first, last) in enumerate(s for s in sections if s[0] == kind):
                section_at[(kind, n)] = (first, last)
        for name, package in dev.items():
            drop = drops.setdefault(package, Drop(package))
            drop.names |= {name, package}
            ranges = drop.lines.setdefault(manifest, [])
            ranges += [(a + 1, b + 1) for a, b in entries.get(name, [])]
            if name in normal:  # the library needs it too: only the dev entry goes, the targets stay
                continue
            for main, (kind, n) in targets.items():
                if any(_uses(snap.read(f) or "", ident) for f in _sources(snap, main)
                       for ident in {name.replace("-", "_"), package.replace("-", "_")}):
                    drop.files |= set(_sources(snap, main))
                    if n is not None and (kind, n) in section_at:
                        first, last = section_at[(kind, n)]
                        ranges.append((first + 1, last + 1))
                    drop.targets.append(f"{main}")
    return {k: v for k, v in drops.items() if any(v.lines.values())}


def _arm(drop: Drop) -> str:
    names = sorted(drop.names | {n.replace("-", "_") for n in drop.names} | {n.replace("_", "-") for n in drop.names})
    cmds = []
    for manifest, ranges in sorted(drop.lines.items()):
        if ranges:
            script = ";".join(f"{a},{b}s/^/#/" for a, b in sorted(set(ranges)))
            cmds.append(f"sed -i {shlex.quote(script)} {shlex.quote(manifest)}")
    if drop.files:
        cmds.append("rm -f " + " ".join(shlex.quote(f) for f in sorted(drop.files)))
    what = drop.crate + (f", with {', '.join(sorted(drop.targets))}" if drop.targets else "")
    cmds.append(f"c={shlex.quote(drop.crate)}; w={shlex.quote(what)}")
    return f"{'|'.join(names)}) {'; '.join(cmds)};;"


def drop_line(drops: dict[str, Drop]) -> str:
    """One shell line (dash): resolve offline; while cargo names a crate it cannot serve that
    the tree declares as a dev-dependency, drop it (the crate nearest the root package in cargo's
    chain first, each at most once); any other resolution error fails the build with cargo's
    message."""
    arms = " ".join(_arm(d) for _, d in sorted(drops.items()))
    log = "/tmp/cargo-resolve.log"
    return (f"{MARK}; dropped=; while ! cargo generate-lockfile --offline >{log} 2>&1; do c=; "
            f"for n in $(grep -o '`[A-Za-z0-9_-]*' {log} | tr -d '`' | tac); do "
            f'case " $dropped " in *" $n "*) continue;; esac; case "$n" in {arms} esac; '
            f'[ -n "$c" ] && break; done; if [ -z "$c" ]; then cat {log}; exit 101; fi; '
            f"dropped=\"$dropped $c\"; r=$(grep -m1 '^error' {log} | cut -c8-160); "
            f'echo "dropped dev-dependency $w: cargo, resolving from {DEBIAN_CRATES}: $r" '
            f"| tee -a /opt/swe-resolved.txt; done; "
            f'echo "dev-dependencies dropped:${{dropped:- none}}"; '
            """awk -F'"' '/^name = /{n=$2} /^version = /{print n"=="$2}' Cargo.lock >> /opt/swe-resolved.txt""")


def drop_unservable_dev_dependencies(recipe: list[str], log: str, snap: Snapshot | None) -> list[str] | None:
    """Applies after "crates from Debian" only (its directory source in the recipe), once, when
    cargo could not resolve a requirement and the tree declares dev-dependencies."""
    if (snap is None or not UNRESOLVED.search(log) or not any(DEBIAN_CRATES in line for line in recipe)
            or any(line.startswith(MARK) for line in recipe)):
        return None
    drops = dev_dependency_drops(snap)
    if not drops:
        return None
    at = next((i for i, line in enumerate(recipe) if line.startswith("cargo ")), len(recipe))
    return recipe[:at] + [drop_line(drops)] + recipe[at:]


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


def cargo_rules(recipe: list[str], log: str, snap: Snapshot | None = None) -> tuple[list[str], str] | None:
    if "--locked" in " ".join(recipe) and re.search(r"lock file .* needs to be updated|--locked was passed", log):
        return [line.replace(" --locked", "") for line in recipe], "stale Cargo.lock"
    fixed = _debian_crates(recipe, log, snap)
    if fixed is not None:
        return fixed, "crates from Debian"
    fixed = drop_unservable_dev_dependencies(recipe, log, snap)
    return (fixed, RULE) if fixed is not None else None
