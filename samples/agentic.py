"""Tiny agentic RL tasks in the cache (``python -m samples agentic``), for configs/rl_agentic_tiny.yaml:

* ``swe/``: one real SWE instance on a tiny git repository (samples/swe_envs/calc/python: ``sub``
  adds instead of subtracting; FAIL_TO_PASS the sub test, PASS_TO_PASS the add test), as
  ``instances.jsonl`` plus ``repos/`` — its environment builds on the Python toolchain image;
* ``terminal/answer``: a Harbor task on the offline Debian base (write 42 into /app/answer.txt),
  verified by its ``tests/test.sh``, with the solution in ``solution/solve.sh``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

TASK_TOML = """schema_version = "1.1"
[task]
name = "samples/answer"
[verifier]
timeout_sec = 60
[agent]
timeout_sec = 120
[environment]
cpus = 1
memory_mb = 256
"""
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt; echo PASS
else echo 0 > /logs/verifier/reward.txt; echo FAIL; fi
"""


def build_agentic(root: Path) -> dict[str, Path]:
    """Write (once) the SWE instance and the Harbor task under ``root``; their paths."""
    from samples.swe_envs.lang_repos import PY, make_repo
    from swe_envs.terminal.task import parse_task_toml, write_task

    swe, task = root / "swe", root / "terminal" / "answer"
    if not (swe / "instances.jsonl").is_file():
        shutil.rmtree(swe, ignore_errors=True)
        inst = make_repo(swe / "repos", PY)
        inst.update(FAIL_TO_PASS=json.dumps(PY.f2p), PASS_TO_PASS=json.dumps(PY.p2p))
        (swe / "instances.jsonl").write_text(json.dumps(inst) + "\n", encoding="utf-8")
    if not (task / "task.toml").is_file():
        write_task(task, parse_task_toml(TASK_TOML), "Write the number 42 into /app/answer.txt.\n", {
            "environment/Dockerfile": "FROM local/debian:bookworm\nWORKDIR /app\n", "tests/test.sh": TEST_SH,
            "solution/solve.sh": "#!/bin/bash\necho 42 > /app/answer.txt\n"})
    return {"swe_instances": swe / "instances.jsonl", "swe_repos": swe / "repos", "terminal": task.parent}
