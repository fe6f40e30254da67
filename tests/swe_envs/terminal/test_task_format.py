"""Harbor task.toml (legacy and current shapes), task layout, steps, and the converter on the real seeds."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from swe_envs.terminal.convert import convert_task, convert_tree
from swe_envs.terminal.task import (
    TaskFormatError,
    load_task,
    parse_task_toml,
    validate_task,
    write_task,
)

LEGACY = """
version = "1.0"
[metadata]
author_name = "a"
difficulty = "easy"
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 600
[environment]
build_timeout_sec = 300
cpus = 2
memory = "2G"
storage = "10G"
allow_internet = false
docker_image = "ubuntu:24.04"
future_key = "kept"
"""

CURRENT = """
schema_version = "1.1"
[task]
name = "demo/hello"
description = "write hello"
[verifier]
timeout_sec = 60
env = { MODE = "strict" }
user = "root"
[agent]
timeout_sec = 300
[solution]
env = { SEED = "1" }
[environment]
cpus = 1
memory_mb = 512
network_mode = "no-network"
env = { A = "b" }
[environment.healthcheck]
command = "test -f /ready"
interval_sec = 1
retries = 5
[custom]
anything = [1, 2]
"""


def test_legacy_shape_normalised_and_unknown_keys_round_trip():
    cfg = parse_task_toml(LEGACY)
    assert cfg.shape == "legacy"
    env = cfg.environment
    assert env.memory_limit_mb() == 2048 and env.network() == "no-network" and env.cpus == 2
    assert cfg.verifier.timeout_sec == 120 and cfg.agent.timeout_sec == 600
    again = tomllib.loads(cfg.to_toml())
    assert again == tomllib.loads(LEGACY)  # nothing dropped, no defaults materialised


def test_current_shape_with_healthcheck_and_unknown_tables():
    cfg = parse_task_toml(CURRENT)
    assert cfg.shape == "current" and cfg.task.name == "demo/hello"
    assert cfg.environment.network() == "no-network" and cfg.environment.memory_limit_mb() == 512
    assert cfg.environment.healthcheck.retries == 5 and cfg.verifier.env == {"MODE": "strict"}
    assert tomllib.loads(cfg.to_toml()) == tomllib.loads(CURRENT)


@pytest.mark.parametrize("text, key", [
    ("[verifier]\ntimeout_sec = -1", "verifier.timeout_sec"),
    ("[environment]\nnetwork_mode = 'sometimes'", "environment.network_mode"),
    ("[environment]\nmemory = 'lots'", "environment.memory"),
    ("[environment]\ncpus = 'two'", "environment.cpus"),
    ("[environment.healthcheck]\ninterval_sec = 1", "environment.healthcheck.command"),
    ("[agent]\ntimeout_sec = [1]", "agent.timeout_sec"),
])
def test_bad_values_name_the_key(text, key):
    with pytest.raises(TaskFormatError, match=key.replace(".", r"\.")):
        parse_task_toml(text, "t/task.toml")


def test_invalid_toml_is_one_clear_error():
    with pytest.raises(TaskFormatError, match="invalid TOML"):
        parse_task_toml("[verifier\n")


def _files(**extra) -> dict:
    files = {"environment/Dockerfile": "FROM local/debian:bookworm\n",
             "solution/solve.sh": "echo hi > /app/out\n",
             "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}
    files.update(extra)
    return files


def test_layout_checks(tmp_path):
    cfg = parse_task_toml(CURRENT)
    t = load_task(write_task(tmp_path / "ok", cfg, "do it\n", _files()))
    assert t.name == "demo/hello" and [s.name for s in t.steps] == ["main"] and t.dockerfile
    assert validate_task(t.path) == []
    no_tests = write_task(tmp_path / "nt", cfg, "do it\n", {"environment/Dockerfile": "FROM x\n"})
    with pytest.raises(TaskFormatError, match="tests/test.sh"):
        load_task(no_tests)
    no_env = write_task(tmp_path / "ne", cfg, "do it\n", {"tests/test.sh": "true\n"})
    with pytest.raises(TaskFormatError, match="docker_image"):
        load_task(no_env)
    baked = write_task(tmp_path / "bk", cfg, "x\n", _files(**{"environment/Dockerfile": "FROM x\nCOPY tests/ /t\n"}))
    assert any("bakes tests/" in p for p in validate_task(baked))


def test_multi_step_task_order_from_toml(tmp_path):
    cfg = parse_task_toml('schema_version = "1.1"\n[[steps]]\nname = "b-setup"\n[[steps]]\nname = "a-use"\n'
                          'timeout_sec = 30\n')
    files = {"environment/Dockerfile": "FROM x\n"}
    for n in ("a-use", "b-setup"):
        files[f"steps/{n}/instruction.md"] = f"step {n}\n"
        files[f"steps/{n}/tests/test.sh"] = "true\n"
        files[f"steps/{n}/solution/solve.sh"] = "true\n"
    t = load_task(write_task(tmp_path / "ms", cfg, "overall\n", files))
    assert [s.name for s in t.steps] == ["b-setup", "a-use"] and t.steps[1].timeout_sec == 30
    (t.path / "steps" / "a-use" / "tests" / "test.sh").unlink()
    with pytest.raises(TaskFormatError, match="steps/a-use/tests/test.sh"):
        load_task(t.path)


def test_convert_every_real_seed(tb_seeds, tmp_path):
    done, failed = convert_tree(tb_seeds, tmp_path / "harbor")
    assert failed == [] and len(done) == 320
    t = load_task(tmp_path / "harbor" / "aider_polyglot" / "polyglot_java_bank-account")
    assert t.config.verifier.timeout_sec == 1800 and t.config.environment.cpus == 1.0
    assert t.config.metadata["parser_name"] == "pytest" and t.config.environment.env["LANG"] == "C.UTF-8"
    assert (t.environment_dir / "workspace" / "gradlew").is_file() and not (t.environment_dir / "tests").exists()
    assert "bank" in t.instruction and (t.path / "tests" / "run-tests.sh").is_file()
    src = tb_seeds / "evoeval" / "3"
    ev = load_task(tmp_path / "harbor" / "evoeval" / "3")
    assert (ev.path / "solution" / "solve.sh").read_bytes() == (src / "solution.sh").read_bytes()
    assert (ev.environment_dir / "Dockerfile").read_bytes() == (src / "Dockerfile").read_bytes()
    assert all(validate_task(p) == [] for p in done[:20])


def test_convert_multi_service_compose_and_errors(tmp_path):
    src = tmp_path / "tb"
    src.mkdir()
    (src / "task.yaml").write_text("instruction: use the db\nmax_test_timeout_sec: 30\nparser_name: pytest\n")
    (src / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (src / "solution.sh").write_text("true\n")
    (src / "run-tests.sh").write_text("true\n")
    (src / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build: {dockerfile: Dockerfile}\n    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n"
        "    environment: ['TEST_DIR=${T_BENCH_TEST_DIR}', 'DB=db']\n  db:\n    image: postgres:16\n")
    t = load_task(convert_task(src, tmp_path / "h"))
    assert t.compose_file is not None and t.config.environment.env == {"DB": "db"}
    compose = t.compose_file.read_text()
    assert "main:" in compose and "db:" in compose and "T_BENCH" not in compose
    with pytest.raises(TaskFormatError, match="exists"):
        convert_task(src, tmp_path / "h")
    (src / "task.yaml").write_text("instruction: x\nparser_name: sweagent\n")
    with pytest.raises(TaskFormatError, match="parser_name 'sweagent'"):
        convert_task(src, tmp_path / "h2")
    (src / "task.yaml").write_text("instruction: x\nmax_test_timeout_sec: -5\n")
    with pytest.raises(Exception, match="verifier.timeout_sec"):
        convert_task(src, tmp_path / "h3")


def test_convert_cli(tmp_path):
    src = tmp_path / "missing"
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "convert", "--input", str(src),
                        "--output", str(tmp_path / "o")], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[3])
    assert r.returncode == 2 and r.stderr.strip() == f"error: input not found: {src}"


def test_needs_report_on_real_seeds(tb_seeds, tmp_path):
    from swe_envs.terminal.needs import offline_capable, task_needs

    def needs(rel):
        return task_needs(load_task(convert_task(tb_seeds / rel, tmp_path / rel.replace("/", "_"))))

    ev = needs("evoeval/3")
    assert offline_capable(ev) and {"uv installer (curl | sh)", "apt-get at test time"} <= {n["need"] for n in ev}
    java = needs("aider_polyglot/polyglot_java_bank-account")
    # served by warm.py: the Gradle wrapper by its stand-in, crates by Debian's librust-*-dev packages
    assert offline_capable(java) and "Gradle distribution download (gradlew)" in {n["need"] for n in java}
    hangman = needs("aider_polyglot/polyglot_java_hangman")
    assert {"need": "Maven dependencies beyond JUnit/AssertJ (io.reactivex.rxjava2:rxjava)", "offline": False} in hangman
    js = needs("aider_polyglot/polyglot_javascript_binary")
    assert offline_capable(js) and "npm install of the project's dependencies at test time" in {n["need"] for n in js}
    rust = needs("aider_polyglot/polyglot_rust_gigasecond")
    crates = [n for n in rust if n["need"] == "crates from a registry (Cargo dependencies)"]
    assert crates[0]["offline"] and crates[0]["debian_packages"] == ["librust-time-dev"]
    # run-tests.sh's `cargo add regex thiserror anyhow` resolves offline from the same Debian packages
    assert {"need": "cargo add of crates at test time", "offline": True,
            "debian_packages": ["librust-anyhow-dev", "librust-regex-dev", "librust-thiserror-dev"]} in rust
    assert offline_capable(needs("aider_polyglot/polyglot_rust_acronym"))
    go = needs("aider_polyglot/polyglot_go_alphametics")
    assert offline_capable(go) and "Go release tarball" in {n["need"] for n in go}
