"""Harbor's separate verifier on a real Docker engine: the tests run in a container of their own that
holds only the declared artifacts (tiny tasks FROM the offline Debian base; the Harbor-native
fixtures wc-report-separate and notes-archive-steps run the real template in test_harbor_native_docker)."""

from __future__ import annotations

import json

import pytest

from swe_envs.terminal.task import load_task
from tests.swe_envs.terminal.test_runner_docker import ctx  # noqa: F401  (the shared Context fixture)
from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker

SOLVE = """#!/bin/bash
set -e
echo 42 > /app/answer.txt
mkdir -p /app/out
echo keep > /app/out/keep.txt
echo noise > /app/out/skip.log
ln -s /etc/shadow /app/out/shadow
echo undeclared > /app/secret.txt
echo published > /logs/artifacts/published.txt
# an agent replacing a tool the tests use: the separate verifier never sees it
printf '#!/bin/sh\\necho 42\\n' > /usr/local/bin/cat && chmod +x /usr/local/bin/cat
"""
CHECK = """#!/bin/bash
ok=1
[ "$(/bin/cat /app/answer.txt)" = "42" ] || { echo "answer"; ok=0; }
[ -f /app/out/keep.txt ] && [ ! -e /app/out/skip.log ] && [ ! -e /app/out/shadow ] || { echo "out"; ok=0; }
[ ! -e /app/secret.txt ] && [ ! -e /usr/local/bin/cat ] || { echo "leaked"; ok=0; }
[ "$(/bin/cat /logs/artifacts/published.txt)" = "published" ] || { echo "published"; ok=0; }
[ "$(/bin/cat /logs/artifacts/hook.txt)" = "hooked 42" ] || { echo "hook"; ok=0; }
[ -f /tests/expected.txt ] || { echo "tests"; ok=0; }
echo $ok > /logs/verifier/reward.txt
"""
TOML = """artifacts = ["/app/answer.txt", { source = "/app/out", exclude = ["*.log"], destination = "kept/out" }]
"""
VERIFIER = """environment_mode = "separate"
[[verifier.collect]]
command = "echo hooked $(cat /app/answer.txt 2>/dev/null) > /logs/artifacts/hook.txt"
"""


def _separate(tmp_path, name: str, verifier: str, extra: dict) -> object:
    root = tiny_task(tmp_path, name, test_sh=CHECK, solve_sh=SOLVE, extra=extra)
    text = (root / "task.toml").read_text().replace("[verifier]\n", f"[verifier]\n{verifier}", 1)
    (root / "task.toml").write_text(TOML + text)
    return root


def test_tests_dockerfile_verifier_sees_only_the_artifacts(ctx, tmp_path):  # noqa: F811
    from swe_envs.terminal.trial import TrialSpec, run_trial

    root = _separate(tmp_path, "bundled", VERIFIER, {"tests/Dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY . /tests/\n"})
    task = load_task(root)
    oracle = run_trial(ctx, TrialSpec(task, "oracle", "t__oracle"), tmp_path / "out")
    assert oracle["reward"] == 1.0, (oracle["error"], (tmp_path / "out/t__oracle/verifier/test-stdout.txt").read_text())
    how = oracle["steps"][0]["verifier"]
    assert how["mode"] == "separate" and how["bundled_tests"] and how["from"] == "tests"
    assert how["collect"] == [{"service": "main", "rc": 0}]
    assert [a["source"] for a in how["artifacts"]] == ["/logs/artifacts", "/app/answer.txt", "/app/out"]
    assert "verifier" in how["images"]["main"]  # the tests image, not the agent's
    assert how["artifacts"][2]["refused"] == ["out/shadow: AbsoluteLinkError"]  # the link to /etc/shadow, counted
    kept = tmp_path / "out" / "t__oracle" / "artifacts"
    assert (kept / "app" / "answer.txt").read_text() == "42\n"
    assert sorted(p.name for p in (kept / "kept" / "out").iterdir()) == ["keep.txt"]  # destination, exclude, no link out
    nop = run_trial(ctx, TrialSpec(task, "nop", "t__nop"), tmp_path / "out")
    assert nop["reward"] == 0.0 and nop["error"] is None
    assert [a["kept"] for a in nop["steps"][0]["verifier"]["artifacts"]][1:] == [None, None]  # missing: skipped


def test_a_copy_of_the_task_environment_with_a_sidecar_artifact(ctx, tmp_path):  # noqa: F811
    """No definition of its own: the verifier runs in a fresh copy of the task's environment (its compose
    services too), tests uploaded; [verifier.environment]'s env reaches it; a sidecar's file is an artifact."""
    from swe_envs.terminal.trial import TrialSpec, run_trial

    compose = ("services:\n  db:\n    image: " + BASE + "\n    command: [sh, -c, 'echo state-$$HOSTNAME > /var/db.txt; "
               "sleep infinity']\n")
    check = CHECK.replace("echo $ok", '[ -n "$(/bin/cat /var/db.txt)" ] && [ "$GRADER" = yes ] || { echo db; ok=0; }\necho $ok')
    root = tiny_task(tmp_path, "copy", test_sh=check, solve_sh=SOLVE,
                     extra={"environment/docker-compose.yaml": compose})
    text = (root / "task.toml").read_text()
    (root / "task.toml").write_text(TOML.replace("]\n", ', { source = "/var/db.txt", service = "db" }]\n', 1) + text
                                    + '\n[[verifier.collect]]\ncommand = "echo hooked $(cat /app/answer.txt) > '
                                    '/logs/artifacts/hook.txt"\n[verifier.environment]\ncpus = 1\nmemory_mb = 256\n'
                                    '[verifier.environment.env]\nGRADER = "yes"\n')
    task = load_task(root)
    oracle = run_trial(ctx, TrialSpec(task, "oracle", "c__oracle"), tmp_path / "out")
    assert oracle["reward"] == 1.0, (oracle["error"], (tmp_path / "out/c__oracle/verifier/test-stdout.txt").read_text())
    how = oracle["steps"][0]["verifier"]
    assert how["from"] == "environment" and not how["bundled_tests"]
    db = (tmp_path / "out" / "c__oracle" / "artifacts" / "var" / "db.txt").read_text()
    assert db.startswith("state-")
    assert json.loads((tmp_path / "out" / "c__oracle" / "result.json").read_text())["reward"] == 1.0


def test_a_gone_container_is_an_error_not_missing_artifacts(ctx, tmp_path):  # noqa: F811
    from swe_envs.terminal.environment import Environment
    from swe_envs.terminal.verifier import score_step

    root = _separate(tmp_path, "gone", VERIFIER, {"tests/Dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY . /tests/\n"})
    task = load_task(root)
    built = ctx.build(task)
    env = Environment(ctx.client, task, built, ctx.cfg.runner)
    try:
        env.main.remove(force=True)  # as the disk guard or a stuck command's stop leaves it
        with pytest.raises(RuntimeError, match="container is gone"):
            score_step(ctx, env, task.steps[0], task, tmp_path / "v", tmp_path / "a")
    finally:
        env.close()
