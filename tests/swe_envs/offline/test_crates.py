"""Cargo dependencies served by Debian (shared by the SWE environments' Rust rule and the
terminal tasks' warm layer): the crates a manifest declares, their Debian packages, and the
shell line that points cargo at Debian's crates."""

from __future__ import annotations

import subprocess

from swe_envs.offline.crates import CARGO_SOURCE, cargo_deps, cargo_source_line, debian_crate_package


def test_registry_crates_only():
    toml = ('[dependencies]\nserde = { version = "1", optional = true }\nlocal = { path = "../x" }\n'
            'fromgit = { git = "https://example.invalid/r" }\nrenamed = { package = "rand_core", version = "0.6" }\n'
            '[dev-dependencies.serde_json]\nversion = "1.0"\n')
    assert cargo_deps(toml) == ["rand_core", "serde", "serde_json"]
    assert cargo_deps("[package\nbroken") == []
    assert debian_crate_package("serde_json") == "librust-serde-json-dev"


def test_source_line_writes_cargo_config(tmp_path):
    home = tmp_path / "cargo"
    subprocess.run(["sh", "-c", cargo_source_line()], check=True, env={"CARGO_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert (home / "config.toml").read_text() == CARGO_SOURCE
