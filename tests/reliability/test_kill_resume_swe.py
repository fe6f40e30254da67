"""Kill-and-resume for the SWE side: issue-PR mining (``python -m pipelines swe-mine``, CI) and
the Dockerized validation and evaluation (``python -m swe_envs validate|evaluate``, long run).
Each job's process group is SIGKILLed at a seeded point, the same command (the Makefile's, with
``--overwrite``: these jobs re-run from scratch) runs again, and its outputs must equal an
uninterrupted run's: documents, rejects, instances, shards and counts for mining; validated
instances (FAIL_TO_PASS / PASS_TO_PASS), failures and resolved ids for the Docker jobs. The
containers a killed validation left running must be gone after the re-run."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from core.cache import cache_dir
from core.cached_samples import SWE_API, SWE_EVENTS, SWE_REPOS
from tests.reliability.kill import (
    after_first,
    files_left,
    jsonl,
    kill_points,
    parquet_rows,
    run_job,
    shard_dir,
    without,
    work_window,
)
from tests.reliability.ledger import LEDGER, LONG

CACHE = cache_dir()
MINE = ["-m", "pipelines", "swe-mine", "--config", "configs/swe_mine.yaml", "--events", str(CACHE / SWE_EVENTS),
        "--api", str(CACHE / SWE_API), "--repos", str(CACHE / SWE_REPOS), "--overwrite", "--output"]
MINE_FIRST = "fingerprint.json"  # written once the inputs are checked, before any parsing


def _mined(out: Path) -> dict:
    job = json.loads((out / "job.json").read_text())
    return {"documents": parquet_rows(out, "documents"), "rejects": parquet_rows(out, "rejects"),
            "instances": jsonl(out / "instances.jsonl"), "shards": shard_dir(out / "shards"),
            "counts": job["counts"]}


@pytest.fixture(scope="module")
def mined(tmp_path_factory) -> tuple[Path, float]:
    """The clean swe-mine run over the Makefile's sample (three real repositories) and its working time."""
    if not (CACHE / SWE_EVENTS).is_dir():
        run_job(["-m", "samples", "swe-mine"])  # what `make data-swe` runs first
    out = tmp_path_factory.mktemp("swe_mine") / "clean"
    return out, work_window(out, MINE_FIRST, [*MINE, str(out)])


@pytest.mark.area("kill-and-resume: swe-mine")
@pytest.mark.timeout(1200)
def test_swe_mine_sigkilled_then_rerun_equals_clean(mined, tmp_path):
    clean_dir, work_s = mined
    clean = _mined(clean_dir)
    assert clean["instances"] and clean["documents"] and clean["rejects"]
    for i, at in enumerate(kill_points(work_s, seed=27, n=4 if LONG else 1)):
        out = tmp_path / f"killed-{i}"
        rc, was_killed, _ = run_job([*MINE, str(out)], kill_when=after_first(out, MINE_FIRST, at))
        state = files_left(out)
        run_job([*MINE, str(out)])
        got = _mined(out)
        LEDGER.add("kill-and-resume: swe-mine", tried=clean["counts"]["parse"]["docs_in"], faults=int(was_killed),
                   lost=sum(abs(len(clean[k]) - len(got[k])) for k in ("documents", "rejects", "instances")))
        for part in clean:
            assert got[part] == clean[part], f"{part} differs; killed {at:.2f}s in (rc {rc}); left: {state[:30]}"


# --- Docker: validate and evaluate (long run) --------------------------------------------------

VOLATILE = frozenset({"seconds", "time_s", "duration_s", "wall_s", "started", "finished", "created_at", "log",
                      "logs", "log_path", "path", "build_s", "test_s", "elapsed_s", "image_bytes", "attempts"})


def _validated(out: Path) -> dict:
    by_id = lambda rows: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))  # noqa: E731
    return {"validated": by_id(without(jsonl(out / "validated.jsonl"), VOLATILE)),
            "failures": by_id(without(jsonl(out / "failures.jsonl"), VOLATILE))}


def _leftover_containers(client, pids: list[int]) -> list[str]:
    """Containers labelled (``swe_envs.owner`` = host:pid, what the sandbox writes) by the killed
    jobs' processes that still exist."""
    owners = {f"{socket.gethostname()}:{p}" for p in pids}
    return [c.name for c in client.containers.list(all=True, filters={"label": "swe_envs.owner"})
            if c.labels.get("swe_envs.owner") in owners]


@pytest.mark.docker
@pytest.mark.area("kill-and-resume: validate/evaluate")
@pytest.mark.timeout(5400)
@pytest.mark.skipif(not LONG, reason="part of the long chaos run (make chaos): image builds and test suites")
def test_validate_and_evaluate_sigkilled_then_rerun_equal_clean(docker_engine, tmp_path):
    """The repo's sample repositories (Python, Go, C; a second Python task on the same image)
    through the validate command of `make data-swe-envs`, then gold evaluation of what validated."""
    from samples.swe_envs.lang_repos import ALL, make_repo  # sample-data builder, not the product

    instances = [make_repo(tmp_path / "repos", ALL[lang]) for lang in ("python", "go", "c")]
    instances.append(dict(instances[0], instance_id="tests__calc-python-2"))
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in instances))
    validate = ["-m", "swe_envs", "validate", "--config", "configs/swe_envs.yaml",
                "--instances", str(tmp_path / "instances.jsonl"), "--repos", str(tmp_path / "repos"),
                "--overwrite", "--output"]
    first = "logs/**/*"
    work_s = work_window(tmp_path / "v-clean", first, [*validate, str(tmp_path / "v-clean")])
    clean = _validated(tmp_path / "v-clean")
    assert clean["validated"], f"nothing validated: {clean['failures']}"
    pids: list[int] = []
    for i, at in enumerate(kill_points(work_s, seed=28, n=2)):
        out = tmp_path / f"v-killed-{i}"
        rc, was_killed, _ = run_job([*validate, str(out)], kill_when=after_first(out, first, at), pids=pids)
        state = files_left(out)
        run_job([*validate, str(out)])
        got = _validated(out)
        left = _leftover_containers(docker_engine[0], pids)
        LEDGER.add("kill-and-resume: validate/evaluate", tried=len(clean["validated"]) + len(clean["failures"]),
                   faults=int(was_killed), lost=abs(len(clean["validated"]) - len(got["validated"])),
                   escapes=len(left))
        assert got == clean, f"killed {at:.2f}s in (rc {rc}); left behind: {state[:30]}"
        assert not left, f"containers of the killed validation survived its re-run: {left}"

    validated = tmp_path / "v-clean" / "validated.jsonl"
    evaluate = ["-m", "swe_envs", "evaluate", "--config", "configs/swe_envs.yaml", "--instances", str(validated),
                "--predictions", "gold", "--overwrite", "--output"]
    work_s = work_window(tmp_path / "e-clean", "*", [*evaluate, str(tmp_path / "e-clean")])
    clean_report = _evaluated(tmp_path / "e-clean")
    assert clean_report["resolved_ids"], clean_report
    for i, at in enumerate(kill_points(work_s, seed=29, n=2)):
        out = tmp_path / f"e-killed-{i}"
        rc, was_killed, _ = run_job([*evaluate, str(out)], kill_when=after_first(out, "*", at), pids=pids)
        run_job([*evaluate, str(out)])
        got = _evaluated(out)
        left = _leftover_containers(docker_engine[0], pids)
        LEDGER.add("kill-and-resume: validate/evaluate", tried=len(clean_report["results"]), faults=int(was_killed),
                   lost=abs(len(clean_report["results"]) - len(got["results"])), escapes=len(left))
        assert got == clean_report, f"killed {at:.2f}s in (rc {rc})"
        assert not left, f"containers of the killed evaluation survived its re-run: {left}"


def _evaluated(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    results = sorted(without(jsonl(out / "results.jsonl"), VOLATILE), key=lambda r: json.dumps(r, sort_keys=True))
    return {"resolved_ids": sorted(report.get("resolved_ids", [])), "results": results}
