"""A real SWE-bench Verified instance (pallets/flask-5014) end to end with the shipped defaults.

``validate --instances I --repos DATA --output OUT`` (no --config; DATA holds the git bundle)
must reproduce SWE-bench's gold FAIL_TO_PASS / PASS_TO_PASS exactly, record the toolchain
choice and its evidence, then ``evaluate`` must resolve the gold patch and count every bad
prediction with its reason. Data: ../shared/swe-real (skipped where it is absent).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.swe_envs.envs.conftest import ROOT, read_jsonl, run_cli, write_jsonl

pytestmark = pytest.mark.docker

DATA = ROOT.parent / "shared" / "swe-real"
IID = "pallets__flask-5014"


def _instance() -> dict:
    src = DATA / "swebench_verified_pytest_flask.jsonl"
    if not src.is_file():
        pytest.skip(f"no real SWE-bench instances at {DATA}")
    return next(r for r in read_jsonl(src) if r["instance_id"] == IID)


@pytest.fixture(scope="module")
def flask_validated(docker_ready, tmp_path_factory):
    inst = _instance()
    root = tmp_path_factory.mktemp("real")
    out = root / "out"
    proc = run_cli("validate", "--instances", str(write_jsonl(root / "i.jsonl", [inst])), "--repos", str(DATA),
                   "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"inst": inst, "root": root, "out": out, "stdout": proc.stdout}


def test_gold_lists_reproduced_with_shipped_defaults(flask_validated):
    out, inst = flask_validated["out"], flask_validated["inst"]
    assert read_jsonl(out / "failures.jsonl") == [], flask_validated["stdout"]
    (rec,) = read_jsonl(out / "validated.jsonl")
    assert json.loads(rec["FAIL_TO_PASS"]) == json.loads(inst["FAIL_TO_PASS"])
    assert sorted(json.loads(rec["PASS_TO_PASS"])) == sorted(json.loads(inst["PASS_TO_PASS"]))
    assert rec["validation"]["gold"]["exact"]
    (env,) = read_jsonl(out / "environments.jsonl")
    assert env["ok"] and env["instances"] == [IID]
    # 2023 code gets the 3.11 of its era (bookworm), its dependencies as of created_at
    assert env["toolchain"]["version"] == "3.11" and env["toolchain"]["base_image"] == "local/debian:bookworm"
    assert env["toolchain"]["evidence"]["date_source"] == "created_at" and env["exclude_newer"] == "2023-03-04"
    assert any(r.startswith("werkzeug==2.2.") for r in env["resolved"])  # Werkzeug 2.3 came out after
    assert env["network"] == "none" and rec["environment"]["network"] == "none"
    assert env["registry"]["ca_bytes"] > 0  # the host's CA bundle went into the image


def test_evaluate_gold_and_bad_predictions(flask_validated):
    root, out = flask_validated["root"], flask_validated["out"]
    (rec,) = read_jsonl(out / "validated.jsonl")
    variants = {k: dict(rec, instance_id=f"{IID}-{k}") for k in ("empty", "malformed", "conflict", "noop")}
    instances = write_jsonl(root / "eval.jsonl", [rec, *variants.values()])
    gold = run_cli("evaluate", "--instances", str(instances), "--predictions", "gold", "--output", str(root / "gold"))
    assert gold.returncode == 0, gold.stdout + gold.stderr
    report = json.loads((root / "gold" / "report.json").read_text())
    assert sorted(report["resolved_ids"]) == sorted([IID, *(v["instance_id"] for v in variants.values())])
    noop = "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+note\n"
    conflict = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    preds = [{"instance_id": IID, "model_patch": rec["patch"], "model_name_or_path": "m"},
             {"instance_id": f"{IID}-empty", "model_patch": "", "model_name_or_path": "m"},
             {"instance_id": f"{IID}-malformed", "model_patch": "just some prose", "model_name_or_path": "m"},
             {"instance_id": f"{IID}-conflict", "model_patch": conflict, "model_name_or_path": "m"},
             {"instance_id": f"{IID}-noop", "model_patch": noop, "model_name_or_path": "m"},
             {"instance_id": "nobody__nothing-1", "model_patch": noop, "model_name_or_path": "m"}]
    path = write_jsonl(root / "preds.jsonl", [*preds, "{not json"])
    proc = run_cli("evaluate", "--instances", str(instances), "--predictions", str(path), "--output", str(root / "m"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((root / "m" / "report.json").read_text())
    assert rep["resolved_ids"] == [IID] and rep["unresolved_ids"] == [f"{IID}-noop"]
    assert rep["empty_patch_ids"] == [f"{IID}-empty"]
    assert set(rep["error_ids"]) == {f"{IID}-malformed", f"{IID}-conflict", "nobody__nothing-1", "preds.jsonl:7"}
    assert "malformed patch" in rep["reasons"][f"{IID}-malformed"]
    assert "does not apply" in rep["reasons"][f"{IID}-conflict"]
    assert "not in --instances" in rep["reasons"]["nobody__nothing-1"]
    assert rep["total_instances"] == 5 and rep["submitted_instances"] == 5 and rep["completed_instances"] == 2
    # SWE-bench's per-instance report, and the run's own log
    per = json.loads((root / "m" / "instances" / f"{IID}-noop" / "report.json").read_text())[f"{IID}-noop"]
    assert per["patch_successfully_applied"] and not per["resolved"]
    assert per["tests_status"]["FAIL_TO_PASS"]["failure"] == json.loads(rec["FAIL_TO_PASS"])
    assert (root / "m" / "instances" / IID / "test_output.txt").is_file()
    results = {r["instance_id"]: r for r in read_jsonl(root / "m" / "results.jsonl")}
    assert results[IID]["resolved"] and results[f"{IID}-noop"]["outcome"] == "unresolved"


def test_bundles_are_repos_and_missing_commits_fall_back(tmp_path):
    """--repos DIR may hold owner__name.bundle; an environment commit absent from it falls back to base."""
    from swe_envs.envs.environment.group import environment_commit
    from swe_envs.repos import find_repo

    inst = _instance()
    path = find_repo(DATA, inst["repo"])
    assert (path / "HEAD").is_file() and find_repo(DATA, inst["repo"]) == path  # cloned once
    assert environment_commit(path, inst) == inst["base_commit"]  # the bundle lacks 182ce3dd
    assert environment_commit(path, dict(inst, environment_setup_commit=inst["base_commit"])) == inst["base_commit"]
    assert Path(path).parent.parent.name == "bundles"
