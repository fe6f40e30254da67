"""A SWE session's verify: what it runs (listed tests by node id, the model's test edits dropped, the
pytest zygote's launch), the warm verifier container on a real engine, and (slow) the real calc
instance end to end: gold 1, nop 0, tests rewritten by the agent 0, a broken fix 0."""

from __future__ import annotations

import json
import threading
import time

import pytest

from swe_envs.envs.evaluate import RunPlan
from swe_envs.sessions.verify import model_part, selected_command
from swe_envs.sessions.zygote import zygote_launch

CMD = "python -m pytest -rA -v -p no:cacheprovider --tb=short --color=no tests/test_a.py tests/test_b.py"


def _plan(f2p, p2p, command=CMD, runner="pytest-swebench", scheme="native") -> RunPlan:
    return RunPlan("img", [], command, "none", runner, scheme, f2p, p2p)


def test_listed_tests_run_by_node_id_only_where_pytest_takes_them_back():
    ids = ["tests/test_a.py::test_x", "tests/test_b.py::TestC::test_y[1-2]"]
    assert selected_command(_plan(ids[:1], ids[1:])) == (
        "python -m pytest -rA -v -p no:cacheprovider --tb=short --color=no "
        "tests/test_a.py::test_x 'tests/test_b.py::TestC::test_y[1-2]'")
    src = "PYTHONPATH=/testbed/src${PYTHONPATH:+:$PYTHONPATH} " + CMD
    assert selected_command(_plan(ids[:1], [], src)).startswith("PYTHONPATH=/testbed/src${PYTHONPATH:+:$PYTHONPATH} ")
    # ids the dataset cut at a space, log noise, a file the command does not run, other runners/schemes
    for f2p, p2p in ((["tests/test_a.py::test_x[a"], []), (ids[:1], ["[100%]"]), (["tests/test_z.py::t"], []),
                     (["tests/test_a.py::test_x[a\\nb]"], [])):
        assert selected_command(_plan(f2p, p2p)) is None
    assert selected_command(_plan(ids[:1], [], runner="go")) is None
    assert selected_command(_plan(ids[:1], [], scheme="bare-name")) is None
    assert selected_command(_plan(ids[:1], [], "make test")) is None


def _diff(path: str, old: str, new: str) -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n")


def test_the_models_edits_to_the_test_patchs_files_are_dropped():
    test_patch = _diff("tests/test_calc.py", "x", "y")
    patch = _diff("calc/__init__.py", "a - b", "a + b") + _diff("tests/test_calc.py", "y", "assert True")
    kept, dropped = model_part(patch, test_patch)
    assert kept == _diff("calc/__init__.py", "a - b", "a + b") and dropped == ["tests/test_calc.py"]
    assert model_part(_diff("tests/other.py", "a", "b"), test_patch) == (_diff("tests/other.py", "a", "b"), [])


def test_the_zygote_starts_only_for_a_plain_pytest_command():
    launch = zygote_launch("PYTHONPATH=/testbed/src " + CMD)
    assert launch.startswith("PYTHONPATH=/testbed/src exec python -c ") and launch.endswith(" tests/test_b.py")
    for cmd in ("make test", CMD + " && echo done", CMD + "; true", "cd x; " + CMD, "python -m unittest"):
        assert zygote_launch(cmd) is None


@pytest.mark.docker
def test_a_warm_verifier_runs_the_sandbox_script_once_and_is_replaced():
    """On a real engine: primed containers wait for /task, run the sandbox's run script (command,
    exit code, log) and are removed; the next is primed; none is left after shutdown."""
    from swe_envs.config import SandboxConfig
    from swe_envs.docker_setup import docker_client, ensure_docker
    from swe_envs.sessions.warm import Verifiers
    from tests.swe_envs.terminal.tiny_tasks import BASE

    ensure_docker(BASE)
    client = docker_client()
    v = Verifiers(client, SandboxConfig(), log=lambda m: None)
    cmd = "echo hello from $(id -u); env | grep -c SWE_ZYGOTE; ls /tmp/swe-task; sleep 1; exit 3"
    before = _verifier_ids(client)
    mine = lambda: _verifier_ids(client) - before  # noqa: E731
    try:
        v.prime(BASE, "none", cmd)
        t0 = time.monotonic()
        while not v.ready.get((BASE, "none", cmd)):
            assert time.monotonic() - t0 < 120
            time.sleep(0.2)
        seen: list[int] = []  # containers ready or starting for this key while the verify runs (>= 1 s)

        def watch() -> None:
            time.sleep(0.3)  # the ready one is taken first
            for _ in range(6):
                seen.append(len(v.ready.get((BASE, "none", cmd), [])) + v.starting.get((BASE, "none", cmd), 0))
                time.sleep(0.1)

        watcher = threading.Thread(target=watch)
        watcher.start()
        res = v.run(BASE, cmd, [])
        watcher.join()
        assert not res.error and res.runs[0].rc == 3, res
        assert seen == [0] * 6  # the next one is not started beside the verify in flight
        assert "hello from 10001" in res.runs[0].log and "\n0\n" in res.runs[0].log  # the zygote's vars are gone
        assert "ready" in res.runs[0].log and "run.sh" in res.runs[0].log
        t0 = time.monotonic()
        while not v.ready.get((BASE, "none", cmd)):  # the next one, started once this one's verify was done
            assert time.monotonic() - t0 < 120
            time.sleep(0.2)
        assert len(mine()) == 1
    finally:
        v.shutdown()
    assert v.ready == {} and mine() == set()


def _verifier_ids(client) -> set[str]:
    """This process's verifier containers on the engine, whatever their state."""
    from swe_envs.sandbox import LABEL, owner
    from swe_envs.sessions.warm import VERIFIER_LABEL

    return {c.id for c in client.containers.list(all=True, filters={"label": [VERIFIER_LABEL, f"{LABEL}={owner()}"]})}


@pytest.mark.docker
def test_shutdown_waits_for_the_verifiers_being_started_and_removed():
    """A verifier still being started, or a used one still being removed, when the pool shuts down is
    gone once ``shutdown`` returns: their threads are daemons, so a process that exits right after
    would otherwise leave a container running (found after a clean session run, 2026-12-02)."""
    from swe_envs.config import SandboxConfig
    from swe_envs.docker_setup import docker_client, ensure_docker
    from swe_envs.sessions.warm import Verifiers
    from tests.swe_envs.terminal.tiny_tasks import BASE

    ensure_docker(BASE)
    client = docker_client()
    before = _verifier_ids(client)
    v = Verifiers(client, SandboxConfig(), log=lambda m: None)
    res = v.run(BASE, "true", [])  # started on demand; afterwards removed and the next primed, both in flight
    assert not res.error and res.runs[0].rc == 0, res
    v.prime(BASE, "none", "exit 0")  # another starting
    v.shutdown()
    assert not [t for t in threading.enumerate() if t.name in ("verifier-prime", "verifier-remove")]
    assert _verifier_ids(client) - before == set()


@pytest.mark.slow
@pytest.mark.docker
def test_calc_instance_verify_is_the_harness_verdict_in_a_warm_container(tmp_path):
    """samples' calc instance (environment built on a cold cache: minutes): the gold fix 1 through the
    pytest zygote by node ids, nothing 0, the tests rewritten to pass 0 (dropped), a broken fix 0."""
    from samples.agentic import build_agentic
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.sessions.pool import SessionPool
    from swe_envs.sessions.run import openers

    ensure_docker("local/debian:bookworm")
    paths = build_agentic(tmp_path / "agentic")
    inst = json.loads(paths["swe_instances"].read_text().splitlines()[0])
    opens, _ = openers(paths["swe_instances"], paths["swe_repos"], None, tmp_path / "out", None, log=lambda m: None)
    pool = SessionPool(opens, 4, log=lambda m: None)
    iid = inst["instance_id"]
    try:
        gold, nop, tamper, broken = (pool.open(iid) for _ in range(4))
        gold.step("str_replace_editor", {"command": "create", "path": "/tmp/gold.diff", "file_text": inst["patch"]})
        assert "[exit code 0]" in gold.step("bash", {"command": "git apply /tmp/gold.diff"}).text
        reward, details = gold.verify()
        assert reward == 1.0 and details["status"] == "resolved" and details["selected"], details
        # where its time went: the diff in the agent's container, pytest's own time inside the run
        assert 0 < details["tests"]["runner_s"] <= details["verify_run_s"] and details["diff_s"] > 0, details
        assert nop.verify()[0] == 0.0
        tamper.step("bash", {"command": "sed -i 's/assert .*/assert True/' tests/test_calc.py"})
        reward, details = tamper.verify()
        assert reward == 0.0 and details["dropped_test_files"] == ["tests/test_calc.py"], details
        broken.step("bash", {"command": "sed -i 's/return a - b/return a * b/; s/return a + b/return 0/' "
                                        "calc/__init__.py"})
        reward, details = broken.verify()
        assert reward == 0.0 and details["status"] == "unresolved", details
    finally:
        pool.shutdown()


def test_the_sandbox_run_script_is_what_the_warm_container_runs():
    """One run script: the warm container copies in ``swe_envs.sandbox``'s own."""
    import swe_envs.sessions.warm as warm
    from swe_envs import sandbox

    assert warm.RUN_SH is sandbox.RUN_SH


def test_pytests_own_time_is_read_from_its_closing_line_in_every_era():
    from swe_envs.sessions.verify import _PYTEST_TIME

    log = ("PASSED tests/test_a.py::test_x\n"
           "============================== 60 passed in 0.12s ==============================\n")
    assert _PYTEST_TIME.findall(log) == ["0.12"]
    assert _PYTEST_TIME.findall("=== 1 failed, 2 passed in 3.10 seconds ===\n") == ["3.10"]  # pytest < 5.1
    assert _PYTEST_TIME.findall("==== 5 passed, 1 warning in 61.23s (0:01:01) ====\n") == ["61.23"]
    assert _PYTEST_TIME.findall("test_in_0.5s.py::test_x PASSED\n") == []  # a test's name is not the summary
