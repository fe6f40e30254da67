"""Dev-dependencies Debian's crates cannot serve, dropped with the targets that use them
(``swe_envs/envs/rules/rust.py``); manifests reduced from rust-hex 0.4.3 and rust-adler32 1.2.0,
whose ``criterion`` 0.3 bookworm does not package. No Docker: the shell line runs against the
host's cargo and a directory registry made here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from swe_envs.envs.rules import rule_fix, rust
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

HEX = """[package]
edition = "2018"
name = "hex"
version = "0.4.3"

[[bench]]
name = "hex"
harness = false
[dependencies.serde]
version = "1.0"
optional = true
default-features = false
[dev-dependencies.criterion]
version = "0.3"

[dev-dependencies.pretty_assertions]
version = "0.6"

[dev-dependencies.version-sync]
version = "0.9"

[features]
default = ["std"]
std = []
"""
HEX_FILES = {
    "Cargo.toml": HEX,
    "src/lib.rs": "pub fn encode() {}\n#[cfg(test)]\nmod tests {\n    use pretty_assertions::assert_eq;\n}\n",
    "benches/hex.rs": "use criterion::{black_box, Criterion};\nfn main() {}\n",
    "tests/version-number.rs": "#[test]\nfn readme() { version_sync::assert_markdown_deps_updated!(\"README.md\"); }\n",
    "tests/plain.rs": "#[test]\nfn t() { assert_eq!(hex::encode(), ()); }\n",
}
ADLER32 = """[package]
name = "adler32"
version = "1.2.0"

[lib]
bench = false

[[bench]]
name = "bench"
path = "src/bench.rs"
harness = false
[dev-dependencies]
criterion = "0.3"
rand = { version = "0.7", features = [
    "small_rng"] }
[target."cfg(target_arch = \\"wasm32\\")".dev-dependencies.wasm-bindgen-test]
version = "0.3"
"""
DEBIAN_LOG = ("error: no matching package named `criterion` found\nlocation searched: registry `crates-io`\n"
              "required by package `hex v0.4.3 (/testbed)`\n")
AFTER_DEBIAN_CRATES = ["pkgs=; echo crates from Debian (/usr/share/cargo/registry)", "d=...", "cargo test --no-run"]


def _snap(tmp_path, name, files):
    repo, head = make_git(tmp_path / name, files)
    return Snapshot(repo, head)


def test_each_dev_dependency_knows_its_lines_and_the_targets_that_use_it(tmp_path):
    drops = rust.dev_dependency_drops(_snap(tmp_path, "hex", HEX_FILES))
    assert sorted(drops) == ["criterion", "pretty_assertions", "version-sync"]
    lines = HEX.splitlines()
    crit = drops["criterion"]
    # its table, and the [[bench]] section whose file uses it
    assert [lines[a - 1:b] for a, b in sorted(crit.lines["Cargo.toml"])] == [
        ["[[bench]]", 'name = "hex"', "harness = false"], ["[dev-dependencies.criterion]", 'version = "0.3"', ""]]
    assert crit.files == {"benches/hex.rs"}
    # an auto-discovered integration test goes with its crate; the library's unit tests never do
    assert drops["version-sync"].files == {"tests/version-number.rs"}
    assert drops["pretty_assertions"].files == set()


def test_inline_keys_multiline_values_and_target_specific_tables(tmp_path):
    drops = rust.dev_dependency_drops(_snap(tmp_path, "adler32", {
        "Cargo.toml": ADLER32, "src/lib.rs": "", "src/bench.rs": "extern crate criterion;\nuse rand::Rng;\n"}))
    lines = ADLER32.splitlines()
    got = {c: [lines[a - 1:b] for a, b in sorted(d.lines["Cargo.toml"])] for c, d in drops.items()}
    assert got["rand"][1] == ['rand = { version = "0.7", features = [', '    "small_rng"] }']
    assert got["criterion"] == [lines[7:11], ['criterion = "0.3"']]  # an explicit path's [[bench]]
    assert got["wasm-bindgen-test"] == [lines[15:17]]
    assert drops["criterion"].files == {"src/bench.rs"}


def test_rule_applies_only_after_crates_from_debian_and_only_once(tmp_path):
    snap = _snap(tmp_path, "hex", HEX_FILES)
    # the crates registry route has not failed yet: the existing rule first
    unreachable = "error: failed to get `criterion` as a dependency of package `hex v0.4.3 (/testbed)`\n"
    assert rule_fix("rust", ["cargo test --no-run"], unreachable, snap)[1] == "crates from Debian"
    assert rule_fix("rust", ["cargo test --no-run"], DEBIAN_LOG, snap) is None
    fixed, rule = rule_fix("rust", AFTER_DEBIAN_CRATES, DEBIAN_LOG, snap)
    assert rule == rust.RULE and fixed[-1] == "cargo test --no-run" and fixed[-2].startswith(rust.MARK)
    assert rule_fix("rust", fixed, DEBIAN_LOG, snap) is None  # once
    assert rule_fix("rust", AFTER_DEBIAN_CRATES, "error[E0425]: cannot find value `x`\n", snap) is None
    assert rule_fix("rust", AFTER_DEBIAN_CRATES, DEBIAN_LOG, None) is None


def _crate(registry, name, version, lib=""):
    d = registry / f"{name}-{version}"
    (d / "src").mkdir(parents=True)
    (d / "Cargo.toml").write_text(f'[package]\nname = "{name}"\nversion = "{version}"\nedition = "2018"\n')
    (d / "src" / "lib.rs").write_text(lib)
    (d / ".cargo-checksum.json").write_text(json.dumps({"files": {}, "package": ""}))  # as Debian ships them


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo (the rule's line runs cargo's resolver)")
def test_the_shell_line_drops_what_the_registry_cannot_serve(tmp_path):
    # a directory registry as Debian's librust-*-dev packages lay it out: pretty_assertions at a
    # matching version, version-sync at a version the manifest does not accept, no criterion
    registry = tmp_path / "registry"
    _crate(registry, "pretty_assertions", "0.6.1", "#[macro_export]\nmacro_rules! assert_eq { ($a:expr, $b:expr) => {} }\n")
    _crate(registry, "version-sync", "0.8.1")
    _crate(registry, "serde", "1.0.106")  # the library's optional dependency
    home = tmp_path / "cargo-home"
    home.mkdir()
    (home / "config.toml").write_text('[source.crates-io]\nreplace-with = "deb"\n'
                                      f'[source.deb]\ndirectory = "{registry}"\n[net]\noffline = true\n')
    tree = tmp_path / "hex"
    snap = _snap(tmp_path, "hex", HEX_FILES)
    resolved = tmp_path / "resolved.txt"
    line = rust.drop_line(rust.dev_dependency_drops(snap)).replace("/opt/swe-resolved.txt",
                                                                                str(resolved))
    env = {**os.environ, "CARGO_HOME": str(home)}
    proc = subprocess.run(["sh", "-c", line], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dev-dependencies dropped: criterion version-sync" in proc.stdout
    assert not (tree / "benches" / "hex.rs").exists() and not (tree / "tests" / "version-number.rs").exists()
    assert (tree / "tests" / "plain.rs").is_file() and (tree / "src" / "lib.rs").is_file()
    record = resolved.read_text().splitlines()
    assert record[:2] == [
        "dropped dev-dependency criterion, with benches/hex.rs: cargo, resolving from /usr/share/cargo/registry: "
        "no matching package named `criterion` found",
        "dropped dev-dependency version-sync, with tests/version-number.rs: cargo, resolving from "
        "/usr/share/cargo/registry: failed to select a version for the requirement `version-sync = \"^0.9\"`"]
    assert "pretty_assertions==0.6.1" in record and "hex==0.4.3" in record
    # the manifest keeps everything else, and cargo builds the tests that remain
    build = subprocess.run(["cargo", "test", "--no-run", "--offline"], cwd=tree, env=env, capture_output=True,
                           text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    # an unresolvable crate that is no dev-dependency: cargo's own error, the build fails
    (tree / "Cargo.toml").write_text(HEX.replace("[features]", '[dependencies.nowhere]\nversion = "1"\n[features]'))
    proc = subprocess.run(["sh", "-c", line], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 101 and "no matching package named `nowhere`" in proc.stdout
