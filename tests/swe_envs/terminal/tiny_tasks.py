"""Tiny Harbor tasks on the offline Debian base (seconds to build, one shared image layer)."""

from __future__ import annotations

from pathlib import Path

from swe_envs.terminal.task import parse_task_toml, write_task

BASE = "local/debian:bookworm"
TOML = """schema_version = "1.1"
[task]
name = "tiny/{name}"
[verifier]
timeout_sec = 60
[agent]
timeout_sec = 60
[environment]
cpus = 1
memory_mb = 256
"""
# the reward is the verdict on /app/answer.txt; the tests dir must only exist at verify time
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ] && [ -f /tests/expected.txt ] && [ ! -e /app/baked ]; then
  echo 1 > /logs/verifier/reward.txt; echo PASS
else
  echo 0 > /logs/verifier/reward.txt; echo FAIL
fi
"""


def tiny_task(root: Path, name: str = "answer", dockerfile: str | None = None, test_sh: str = TEST_SH,
              solve_sh: str = "#!/bin/bash\necho 42 > /app/answer.txt\n", extra: dict | None = None) -> Path:
    files = {"environment/Dockerfile": dockerfile or f"FROM {BASE}\nWORKDIR /app\n",
             "solution/solve.sh": solve_sh, "tests/test.sh": test_sh, "tests/expected.txt": "42\n"}
    files.update(extra or {})
    return write_task(root / name, parse_task_toml(TOML.format(name=name)),
                      "Write the number 42 into /app/answer.txt.\n", files)
