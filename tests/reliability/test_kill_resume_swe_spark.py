"""Kill-and-resume for ``validate --master local[2]`` (long run): the driver, its JVM and the executors'
Python workers (one process group) are SIGKILLed while an executor's test containers run; the same
command with ``--overwrite`` must then write what an uninterrupted run writes, and the containers the
killed executors left must be gone (each task sweeps its engine's orphans before it starts)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.reliability.kill import jsonl, run_job, without
from tests.reliability.ledger import LEDGER, LONG
from tests.reliability.test_kill_resume_swe import VOLATILE


def _validated(out: Path) -> dict:
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    return {name: sorted(without(jsonl(out / f"{name}.jsonl"), VOLATILE), key=key)
            for name in ("validated", "failures")}


@pytest.mark.docker
@pytest.mark.spark
@pytest.mark.area("kill-and-resume: validate/evaluate")
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not LONG, reason="part of the long chaos run (make chaos): Spark + image builds + test suites")
def test_validate_on_spark_sigkilled_mid_container_then_rerun_equals_clean(docker_engine, tmp_path):
    from samples.swe_envs.lang_repos import PY, make_repo  # sample-data builder, not the product

    client = docker_engine[0]
    first = make_repo(tmp_path / "repos", PY, "sparkkill")
    second = make_repo(tmp_path / "repos", PY, "sparkkill-b")  # a second repo-version: two Spark tasks
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (first, second)))
    validate = ["-m", "swe_envs", "validate", "--instances", str(tmp_path / "in.jsonl"), "--repos",
                str(tmp_path / "repos"), "--master", "local[2]", "--overwrite", "--output"]
    run_job([*validate, str(tmp_path / "warm")], timeout=1200)  # builds what a fresh engine lacks
    run_job([*validate, str(tmp_path / "clean")], timeout=1200)
    clean = _validated(tmp_path / "clean")
    assert len(clean["validated"]) == 2, clean

    owners: set[str] = set()

    def running() -> bool:  # an executor's test container of this batch is up
        for c in client.containers.list(filters={"label": "swe_envs.owner"}, ignore_removed=True):
            if "sparkkill" in (c.attrs.get("Config") or {}).get("Image", ""):  # the batch's env/instance image
                owners.add(c.labels["swe_envs.owner"])
        return bool(owners)

    out = tmp_path / "killed"
    rc, was_killed, _ = run_job([*validate, str(out)], kill_when=running, timeout=1200)
    assert was_killed, "the run ended before any test container started"
    run_job([*validate, str(out)], timeout=1200)
    left = [c.name for c in client.containers.list(all=True, filters={"label": "swe_envs.owner"}, ignore_removed=True)
            if c.labels.get("swe_envs.owner") in owners]
    got = _validated(out)
    LEDGER.add("kill-and-resume: validate/evaluate", tried=2, faults=1,
               lost=abs(len(clean["validated"]) - len(got["validated"])), escapes=len(left))
    assert got == clean, f"rc {rc}"
    assert not left, f"containers of the killed executors survived the re-run: {left}"
    assert all(o.startswith(f"{socket.gethostname()}:") for o in owners)
