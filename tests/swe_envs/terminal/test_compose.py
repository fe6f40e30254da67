"""Harbor's compose merge (base main + the task's file) and the network decision, without Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_envs.terminal.compose import MAIN_IMAGE, interpolate, main_service, task_services
from swe_envs.terminal.config import RunnerConfig
from swe_envs.terminal.environment import network_decision
from swe_envs.terminal.task import TaskFormatError, load_task
from tests.swe_envs.terminal.tiny_tasks import tiny_task

FIXTURES = Path(__file__).parent / "fixtures" / "harbor_native"


def test_main_without_build_or_image_is_built_from_the_dockerfile():
    svc = task_services(load_task(FIXTURES / "compose-api-token"))
    assert list(svc) == ["main", "api"] and main_service(svc) == "main"
    assert svc["main"]["build"] == {"context": "."}  # Harbor's base: environment/Dockerfile
    assert svc["main"]["environment"] == {"API_URL": "http://api:8080"} and "api" in svc["main"]["depends_on"]
    # Harbor's ${CONTEXT_DIR} and a default, interpolated as compose does
    assert svc["api"]["build"] == {"context": str((FIXTURES / "compose-api-token" / "environment").resolve()) + "/api"}


def test_compose_without_main_gets_harbors_base_main():
    svc = task_services(load_task(FIXTURES / "compose-redis-sidecar"))
    assert list(svc) == ["main", "cache"] and svc["main"] == {"build": {"context": "."}}


def test_docker_image_is_the_base_and_a_task_build_wins(tmp_path):
    t = tiny_task(tmp_path, "img", extra={"environment/docker-compose.yaml": "services:\n  main:\n    environment: [A=1]\n"})
    (t / "environment" / "Dockerfile").unlink()
    (t / "task.toml").write_text((t / "task.toml").read_text() + 'docker_image = "python:3.11-slim"\n')
    assert task_services(load_task(t))["main"] == {"environment": ["A=1"], "image": "python:3.11-slim"}
    own = tiny_task(tmp_path, "own", extra={"environment/docker-compose.yaml":
                                            "services:\n  main:\n    build: {context: ., dockerfile: Alt}\n"})
    assert task_services(load_task(own))["main"]["build"] == {"context": ".", "dockerfile": "Alt"}
    assert task_services(load_task(FIXTURES / "roman-prebuilt-image")) == {"main": {"image": "python:3.13-slim"}}


def test_nothing_to_build_main_from_is_an_error_naming_it(tmp_path):
    t = tiny_task(tmp_path, "none", extra={"environment/docker-compose.yaml":
                                           "services:\n  main:\n    environment: {A: 1}\n  db:\n    image: x\n"})
    (t / "environment" / "Dockerfile").unlink()
    with pytest.raises(TaskFormatError, match="services.main has neither build nor image"):
        task_services(load_task(t))
    # a Terminal-Bench-era file without main and without a Dockerfile keeps its own main (client)
    tb = tiny_task(tmp_path, "tb", extra={"environment/docker-compose.yaml":
                                          "services:\n  client:\n    image: x\n  db:\n    image: y\n"})
    (tb / "environment" / "Dockerfile").unlink()
    assert main_service(task_services(load_task(tb))) == "client"


def test_network_decision_is_recorded_for_every_shape(tmp_path):
    legacy = load_task(FIXTURES / "wordfreq-allow-internet")  # allow_internet = true
    d = network_decision(legacy, RunnerConfig())
    assert d["asked"] == "public" and d["declared_by"] == "allow_internet" and d["run"] == "offline"
    assert "runner.network = none" in d["reason"]
    assert network_decision(legacy, RunnerConfig(network="task"))["run"] == "public"
    implicit = network_decision(load_task(FIXTURES / "hello-world"), RunnerConfig())
    assert implicit["asked"] == "public" and implicit["declared_by"].startswith("default")
    closed = network_decision(load_task(FIXTURES / "roman-prebuilt-image"), RunnerConfig(network="task"))
    assert closed == {"asked": "no-network", "declared_by": "network_mode", "phases": {}, "run": "offline",
                      "reason": "the task asks for no network"}


def test_steps_fall_back_to_shared_tests_and_take_step_verifier_timeouts(tmp_path):
    t = load_task(FIXTURES / "access-log-steps")
    assert [s.name for s in t.steps] == ["extract", "report"] and [s.timeout_sec for s in t.steps] == [300.0, 300.0]
    root = tiny_task(tmp_path, "shared")  # tests/test.sh at the top, steps without their own tests
    (root / "task.toml").write_text((root / "task.toml").read_text() + '\n[[steps]]\nname = "a"\n')
    (root / "steps" / "a").mkdir(parents=True)
    (root / "steps" / "a" / "instruction.md").write_text("do a\n")
    assert load_task(root).steps[0].tests_dir == root / "tests"


@pytest.mark.parametrize("text,want", [
    ("plain", "plain"), ("$$HOME and $$$A", "$HOME and $1"), ("${A}/x", "1/x"), ("$A.$E", "1."),
    ("${U:-d}", "d"), ("${E:-d}", "d"), ("${E-d}", ""), ("${U-d}", "d"), ("${A:-d}", "1"),
    ("${A:+alt}", "alt"), ("${E:+alt}", ""), ("${E+alt}", "alt"), ("${U+alt}", ""),
    ("${U:-${A}-${B:-x}}", "1-x"), ("${A?must}", "1"), ("${E?must}", ""),
])
def test_compose_interpolation(text, want):
    unset: set[str] = set()
    assert interpolate(text, {"A": "1", "E": ""}, unset) == want
    assert "A" not in unset


def test_compose_interpolation_errors_and_unset_names():
    unset: set[str] = set()
    assert interpolate("x${NOPE}y$OTHER", {}, unset) == "xy" and unset == {"NOPE", "OTHER"}
    for bad, match in (("${U:?set it}", "required variable U is missing a value: set it"),
                       ("${E:?}", "required variable E"), ("${U?}", "required variable U"),
                       ("${A", "no closing brace"), ("cost $5", "neither"), ("${A B}", "invalid interpolation")):
        with pytest.raises(TaskFormatError, match=match):
            interpolate(bad, {"A": "1", "E": ""}, set())


def test_harbor_variables_main_image_and_a_context_outside_the_task(tmp_path):
    """${MAIN_IMAGE_NAME} on main is Harbor's base; on a sidecar, main's own build. ${CPUS}/${MEMORY} are the task's."""
    compose = ("services:\n  main:\n    image: ${MAIN_IMAGE_NAME}\n    environment:\n      - N=${CPUS}\n"
               "      - M=${MEMORY}\n      - L=${ENV_VERIFIER_LOGS_PATH}\n      - P=${PREBUILT_IMAGE_NAME:-none}\n"
               "  worker:\n    image: ${MAIN_IMAGE_NAME}\n    command: [sleep, '1']\n")
    t = tiny_task(tmp_path, "vars", extra={"environment/docker-compose.yaml": compose})
    svc = task_services(load_task(t))
    assert svc["main"]["build"] == {"context": "."} and "image" not in svc["main"]
    assert svc["main"]["environment"] == ["N=1", "M=256M", "L=/logs/verifier", "P=none"]
    assert svc["worker"] == {"build": {"context": "."}, "command": ["sleep", "1"]} and MAIN_IMAGE not in str(svc)
    for ctx in ("/", "../..", "${CONTEXT_DIR}/../../.."):
        out = tiny_task(tmp_path / ctx.replace("/", "_").replace("$", "v"), "ctx", extra={
            "environment/docker-compose.yaml": f"services:\n  db:\n    build:\n      context: {ctx}\n"})
        with pytest.raises(TaskFormatError, match="outside the task's folder"):
            task_services(load_task(out))
    inside = tiny_task(tmp_path / "in", "ctx", extra={"environment/docker-compose.yaml":
                                                      "services:\n  db:\n    build: ../tests\n"})
    assert task_services(load_task(inside))["db"]["build"] == "../tests"  # the task's own folder is fine
