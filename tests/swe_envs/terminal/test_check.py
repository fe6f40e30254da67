"""check.py without Docker: row verdicts and the unprovisioned needs a failed row names."""

from __future__ import annotations

from swe_envs.terminal.check import check_row, with_needs

CRATES = {"need": "crates from a registry (Cargo dependencies)", "offline": False}
IMAGE = {"need": "image buildpack-deps:jammy", "offline": True}


def _trial(reward, built=True, error=None):
    return {"built": built, "reward": reward, "error": error}


def test_failed_row_names_unprovisioned_needs():
    row = with_needs(check_row("t", _trial(0.0), _trial(0.0)), [IMAGE, CRATES])
    assert row["reason"] == ("oracle reward 0.0 (the reference solution does not pass) "
                             "[not provisioned offline: crates from a registry (Cargo dependencies)]")


def test_passing_or_fully_provisioned_rows_are_unchanged():
    ok = with_needs(check_row("t", _trial(1.0), _trial(0.0)), [CRATES])
    assert ok["ok"] and ok["reason"] == ""
    bad = with_needs(check_row("t", _trial(0.0), _trial(0.0)), [IMAGE])
    assert bad["reason"] == "oracle reward 0.0 (the reference solution does not pass)"


def test_a_task_not_readable_on_the_executor_runs_from_its_shipped_copy(tmp_path):
    """On a cluster without a shared filesystem the item's copy of the task is what gets loaded
    (here: a task.toml with a bad value, so the check ends at loading, before any Docker work)."""
    import os
    import re

    from swe_envs.terminal.check import CheckWork, _task_files
    from swe_envs.terminal.config import TerminalConfig
    from tests.swe_envs.terminal.tiny_tasks import tiny_task

    task = tiny_task(tmp_path / "driver", "shipped")
    toml = task / "task.toml"
    toml.write_text(re.sub(r"timeout_sec = [0-9.]+", 'timeout_sec = "soon"', toml.read_text(), count=1))
    item = {"name": "set/shipped", "path": str(tmp_path / "not-on-this-node"), "files": _task_files(task)}
    st = {"ctx": None, "out": tmp_path / "out", "src": tmp_path / "src"}
    events: list = []
    CheckWork(TerminalConfig()).run(st, item, lambda kind, value: events.append((kind, value)))
    ((kind, value),) = events
    assert kind == "row" and value["row"]["task"] == "set/shipped" and not value["row"]["ok"]
    copy = tmp_path / "src" / "set" / "shipped"
    assert value["row"]["reason"].startswith(f"task: {copy}") and "timeout_sec" in value["row"]["reason"]
    assert (copy / "task.toml").read_text() == toml.read_text()
    assert os.access(copy / "solution" / "solve.sh", os.X_OK) == os.access(task / "solution" / "solve.sh", os.X_OK)


def test_every_row_carries_the_network_decision():
    from swe_envs.terminal.check import summarize

    net = {"asked": "public", "declared_by": "allow_internet", "phases": {}, "run": "offline", "reason": "r"}
    passed = check_row("a", {**_trial(1.0), "network": net}, _trial(0.0))
    unbuilt = check_row("b", {**_trial(None, built=False, error="build: x"), "network": net}, None)
    unread = check_row("c", None, None, "task: bad toml")  # a task that never loaded has no decision
    assert passed["network"] == unbuilt["network"] == net and unread["network"] is None
    assert summarize([passed, unbuilt, unread])["network"] == {"public -> offline": 2, "unknown": 1}
