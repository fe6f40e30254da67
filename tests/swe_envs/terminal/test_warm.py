"""warm.py without Docker: which build contexts get which rule, and the layer it builds."""

from __future__ import annotations

import json
import subprocess

from swe_envs.terminal.warm import GRADLE, GRADLEW_STANDIN, NPM, warm_context, warm_dockerfile, warmings


def _write(root, rel, text):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_npm_rule_needs_declared_dependencies(tmp_path):
    _write(tmp_path, "workspace/package.json", json.dumps({"name": "x", "devDependencies": {"jest": "^29"}}))
    assert warmings(tmp_path) == [NPM]
    bare = tmp_path / "bare"
    _write(bare, "package.json", json.dumps({"name": "x", "dependencies": {}}))
    _write(bare, "broken/package.json", "{not json")
    # a package.json inside node_modules is someone else's, not the project's
    _write(bare, "node_modules/dep/package.json", json.dumps({"dependencies": {"a": "1"}}))
    assert warmings(bare) == []


def test_gradle_rule_needs_a_distribution_url(tmp_path):
    _write(tmp_path, "workspace/gradle/wrapper/gradle-wrapper.properties",
           "distributionUrl=https\\://example.invalid/gradle-8.7-bin.zip\n")
    assert warmings(tmp_path) == [GRADLE]
    other = tmp_path / "other"
    _write(other, "gradle/wrapper/gradle-wrapper.properties", "zipStorePath=wrapper/dists\n")
    assert warmings(other) == []


def test_warm_layer_builds_on_the_task_image(tmp_path):
    df = warm_dockerfile("terminal/t-main:abc", [NPM, GRADLE])
    lines = df.splitlines()
    assert lines[0] == "FROM terminal/t-main:abc"
    assert "npm install" in lines[1] and "junit5 libassertj-core-java" in lines[2]
    assert "mv gradlew gradlew.upstream" in df
    assert warm_context([NPM]) == {} and warm_context([NPM, GRADLE]) == {"gradlew-standin": GRADLEW_STANDIN.encode()}


def test_gradlew_standin_rejects_unknown_tasks_and_needs_one(tmp_path):
    script = tmp_path / "gradlew"
    script.write_text(GRADLEW_STANDIN)
    script.chmod(0o755)
    r = subprocess.run([str(script), "publish"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "task 'publish' is not supported" in r.stderr
    r = subprocess.run([str(script), "--no-daemon"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "no task given" in r.stderr
    # no test sources: a failure, never a pass
    r = subprocess.run([str(script), "test", "--no-daemon", "--console=plain"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 1 and "no tests under src/test/java" in r.stderr


def test_cargo_rule_lists_registry_crates_as_debian_packages(tmp_path):
    from swe_envs.offline.crates import cargo_deps, debian_crate_package
    from swe_envs.terminal.warm import CARGO

    toml = ('[package]\nname = "x"\n[dependencies]\nrand = "0.8"\nlocal = { path = "../l" }\n'
            'num_bigint = { version = "0.4", package = "num-bigint" }\n[dev-dependencies]\nanyhow = "1"\n')
    assert cargo_deps(toml) == ["anyhow", "num-bigint", "rand"]
    assert cargo_deps("[package]\nname = 'x'\n") == [] and cargo_deps("not = [toml") == []
    assert debian_crate_package("num_bigint") == "librust-num-bigint-dev"
    _write(tmp_path, "workspace/Cargo.toml", toml)
    # a vendored crate under target/ is a build output, not a declaration
    _write(tmp_path, "workspace/target/x/Cargo.toml", '[dependencies]\nserde = "1"\n')
    assert warmings(tmp_path) == [CARGO]
    df = warm_dockerfile("terminal/r-main:1", [CARGO], tmp_path)
    assert "librust-anyhow-dev librust-num-bigint-dev librust-rand-dev" in df
    assert 'replace-with = \\"debian-packages\\"' not in df and "/usr/share/cargo/registry" in df
    assert all(line.split()[0] in {"FROM", "RUN", "COPY"} for line in df.splitlines())
    assert warm_context([CARGO]) == {}
    _write(tmp_path / "plain", "Cargo.toml", '[package]\nname = "p"\n[dependencies]\n')
    assert warmings(tmp_path / "plain") == []


def test_cargo_add_at_test_time_names_registry_crates():
    from swe_envs.terminal.warm import cargo_added

    script = ("if [ -f Cargo.toml ]; then\n    cargo add regex 2>/dev/null || true\n"
              "    cargo add thiserror 2>/dev/null || true\nfi\n"
              "cargo add serde -F derive --rename ser; cargo add tokio@1.2 --features full\n"
              "cargo add --path ../local mine\ncargo add --git https://example.invalid/x.git other\n"
              "(cd sub && cargo add --dev rand>log)\necho cargo add quoted  # not a command\n")
    assert cargo_added(script) == ["rand", "regex", "serde", "thiserror", "tokio"]
    assert cargo_added("cargo build\n") == []


def test_cargo_add_rule_reads_the_tests_scripts(tmp_path):
    from swe_envs.terminal.warm import CARGO, CARGO_ADD, test_scripts

    _write(tmp_path, "ctx/Cargo.toml", '[package]\nname = "x"\n[dependencies]\nanyhow = "1"\n')
    _write(tmp_path, "tests/run-tests.sh", "cargo add regex || true\ncargo add anyhow || true\n")
    _write(tmp_path, "tests/helper.py", "cargo add notashell\n")
    tests = test_scripts([tmp_path / "tests", tmp_path / "missing", None])
    assert "notashell" not in tests
    assert warmings(tmp_path / "ctx", tests) == [CARGO, CARGO_ADD]
    df = warm_dockerfile("terminal/r-main:1", [CARGO, CARGO_ADD], tmp_path / "ctx", tests)
    # declared crates are required; added ones only where Debian packages them (the tests' `|| true`)
    assert 'for p in librust-regex-dev; do if apt-cache show "$p"' in df
    assert "apt-get install -y librust-anyhow-dev $m" in df
    # recommends on: a crate's +default package brings its default features' optional dependencies
    assert "--no-install-recommends" not in df
    assert df.count("/usr/share/cargo/registry") == 1
    only_added = warm_dockerfile("terminal/r-main:1", [CARGO_ADD], tmp_path / "none", tests)
    assert "librust-anyhow-dev librust-regex-dev; do" in only_added
