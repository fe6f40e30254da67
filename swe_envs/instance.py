"""The SWE-bench task instance: the one schema mining writes (``OUT/instances.jsonl``) and the
environments read (``python -m swe_envs validate --instances``, ``read_instances``).

Fields follow SWE-bench's datasets, so its instances validate here as they are and ours load
in its tools. ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` are JSON-encoded lists (as in SWE-bench):
empty when mined, filled by validation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import parsed_lines

# what validation cannot work without (an instance missing one is a failure record)
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch")


def missing_fields(inst: dict[str, Any]) -> list[str]:
    """The required fields ``inst`` lacks or leaves empty, in schema order."""
    return [k for k in REQUIRED if inst.get(k) in (None, "")]


def read_instances(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(instances, failures): a malformed line or a missing field is a failure, not a crash."""
    if not path.is_file():
        raise InputError(f"instances file not found: {path}")
    good, bad, seen = [], [], set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, inst, err in parsed_lines(fh):
            if err is not None:
                bad.append({"instance_id": f"{path.name}:{n}", "stage": "read", "reason": f"malformed JSON: {err}"})
                continue
            if not isinstance(inst, dict):
                bad.append({"instance_id": f"{path.name}:{n}", "stage": "read", "reason": "not a JSON object"})
                continue
            missing = missing_fields(inst)
            iid = str(inst.get("instance_id") or f"{path.name}:{n}")
            if missing:
                bad.append({"instance_id": iid, "stage": "read", "reason": f"missing field(s): {', '.join(missing)}"})
            elif iid in seen:
                bad.append({"instance_id": iid, "stage": "read", "reason": "duplicate instance_id"})
            else:
                seen.add(iid)
                good.append(inst)
    return good, bad


def new_instance(
    *,
    instance_id: str,
    repo: str,
    base_commit: str | None,
    problem_statement: str,
    hints_text: str,
    patch: str,
    test_patch: str,
    created_at: str,
    pull_number: int,
    issue_numbers: list[int],
    issue_repo: str,
) -> dict[str, Any]:
    """A mined instance: not validated yet (no version, empty FAIL_TO_PASS / PASS_TO_PASS); its
    environment is built at the base commit."""
    return {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": base_commit,
        "problem_statement": problem_statement,
        "hints_text": hints_text,
        "patch": patch,
        "test_patch": test_patch,
        "created_at": created_at,
        "version": "",
        "environment_setup_commit": base_commit,
        "FAIL_TO_PASS": json.dumps([]),
        "PASS_TO_PASS": json.dumps([]),
        "pull_number": pull_number,
        "issue_numbers": issue_numbers,
        "issue_repo": issue_repo,
    }
