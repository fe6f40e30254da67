"""Cargo dependencies served by Debian: the one place both the SWE environments and the terminal
tasks' warm layer read a Cargo.toml's registry crates and name Debian's packages for them.

No crates registry is reachable here; Debian's ``librust-*-dev`` packages unpack each crate's
source with its checksum file under ``/usr/share/cargo/registry``, which cargo takes as a
*directory source* in place of crates-io (what Debian's own dh-cargo builds do).
"""

from __future__ import annotations

import re
import tomllib

DEBIAN_CRATES = "/usr/share/cargo/registry"
CARGO_SOURCE = ('[source.crates-io]\nreplace-with = "debian-packages"\n'
                f'[source.debian-packages]\ndirectory = "{DEBIAN_CRATES}"\n')


def cargo_deps(text: str) -> list[str]:
    """Registry crates a Cargo.toml declares ([dependencies], [dev-dependencies]); path/git ones are local."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    out = []
    for table in ("dependencies", "dev-dependencies"):
        for name, spec in (data.get(table) or {}).items():
            if isinstance(spec, dict):
                if "path" in spec or "git" in spec:
                    continue
                name = spec.get("package", name)
            out.append(name)
    return sorted(set(out))


def debian_crate_package(crate: str) -> str:
    return "librust-" + re.sub(r"[^a-z0-9]+", "-", crate.lower()) + "-dev"


def cargo_source_line() -> str:
    """A shell line that points cargo's crates-io at Debian's crates (printf expands the newline
    escapes: a Dockerfile line holds no newline)."""
    return ('d="${CARGO_HOME:-$HOME/.cargo}" && mkdir -p "$d" && printf '
            f"'{CARGO_SOURCE.replace(chr(10), chr(92) + 'n')}' >> \"$d/config.toml\"")
