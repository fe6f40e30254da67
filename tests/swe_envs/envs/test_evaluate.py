"""Evaluation pieces that need no Docker: predictions, patch checks, grading, the report, network."""

from __future__ import annotations

import json

import pytest

from core.errors import InputError
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.environment.builder import Environment
from swe_envs.envs.environment.network_needs import network_needed
from swe_envs.envs.evaluate import Outcome, grade, make_report, patch_problem, read_predictions
from swe_envs.envs.validate.validator import Validator, gold_comparison, misses_gold

INSTANCES = {"a": {"instance_id": "a", "patch": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n"},
             "b": {"instance_id": "b", "patch": "p"}}


def test_predictions_in_every_swebench_shape(tmp_path):
    gold, problems = read_predictions("gold", INSTANCES)
    assert gold["a"]["model_patch"] == INSTANCES["a"]["patch"] and gold["a"]["model_name_or_path"] == "gold"
    rows = [{"instance_id": "a", "model_patch": "x", "model_name_or_path": "m"}, {"model_patch": "y"}]
    (tmp_path / "p.json").write_text(json.dumps(rows))
    (tmp_path / "d.json").write_text(json.dumps({"a": rows[0]}))
    (tmp_path / "p.jsonl").write_text(json.dumps(rows[0]) + "\n{oops\n" + json.dumps(rows[0]) + "\n")
    preds, problems = read_predictions(str(tmp_path / "p.json"), INSTANCES)
    assert list(preds) == ["a"] and problems == [{"instance_id": "p.json:2", "reason": "prediction without an instance_id"}]
    assert list(read_predictions(str(tmp_path / "d.json"), INSTANCES)[0]) == ["a"]
    preds, problems = read_predictions(str(tmp_path / "p.jsonl"), INSTANCES)
    assert [p["reason"].split(":")[0] for p in problems] == ["malformed prediction line", "duplicate prediction"]
    # a one-line JSONL file is one prediction, not a map of ids to its three fields
    (tmp_path / "one.jsonl").write_text(json.dumps(rows[0]) + "\n")
    preds, problems = read_predictions(str(tmp_path / "one.jsonl"), INSTANCES)
    assert list(preds) == ["a"] and problems == []
    with pytest.raises(InputError, match="predictions file not found"):
        read_predictions(str(tmp_path / "nope.jsonl"), INSTANCES)


def test_patch_problems_are_outcomes():
    assert patch_problem(None) == ("empty_patch", "model_patch is null")
    assert patch_problem("  \n")[0] == "empty_patch"
    assert patch_problem(42)[0] == "error"
    assert patch_problem("I think the bug is in foo()")[1].startswith("malformed patch")
    assert patch_problem("--- a/x\n+++ b/x\nno hunks\n")[1].startswith("malformed patch")
    assert patch_problem(INSTANCES["a"]["patch"]) is None


def test_grading_and_report():
    ok, status = grade({"t1": "passed", "t2": "passed"}, ["t1"], ["t2"])
    assert ok and status["FAIL_TO_PASS"] == {"success": ["t1"], "failure": []}
    ok, status = grade({"t1": "passed", "t2": "failed"}, ["t1"], ["t2", "t3"])  # missing = failed
    assert not ok and status["PASS_TO_PASS"]["failure"] == ["t2", "t3"]
    outcomes = [Outcome("a", "m", "resolved"), Outcome("b", "m", "empty_patch", "model_patch is empty")]
    rep = make_report({"a": {}, "b": {}, "c": {}}, {"a": {}, "b": {}}, outcomes, [{"instance_id": "x", "reason": "r"}])
    assert rep["resolved_ids"] == ["a"] and rep["empty_patch_ids"] == ["b"] and rep["incomplete_ids"] == ["b", "c"]
    assert rep["total_instances"] == 3 and rep["submitted_instances"] == 2 and rep["error_ids"] == ["x"]
    assert rep["schema_version"] == 2 and rep["reasons"] == {"b": "model_patch is empty", "x": "r"}


def test_network_per_repo_and_instance_and_detection():
    cfg = SweEnvsConfig()
    cfg.validation.network = {"i-2": "bridge"}
    v = Validator(None, 1, True, None, cfg=cfg)
    env = Environment("o/r", "c", "python", True)
    assert v.network({"instance_id": "i-1"}, env) == "none" and v.network({"instance_id": "i-2"}, env) == "bridge"
    env.network = "bridge"  # from validation.network[repo], recorded in the environment spec
    assert v.network({"instance_id": "i-1"}, env) == "bridge"
    log = "E   urllib3.exceptions.NewConnectionError: Failed to establish a new connection: [Errno -3] " \
          "Temporary failure in name resolution"
    assert network_needed(["ok", log]) in ("NewConnectionError", "Temporary failure in name resolution")
    assert network_needed(["AssertionError: 1 != 2"]) is None


def test_gold_comparison():
    inst = {"FAIL_TO_PASS": json.dumps(["t1"]), "PASS_TO_PASS": json.dumps(["t2", "t3"])}
    assert gold_comparison(inst, ["t1"], ["t3", "t2"])["exact"]
    diff = gold_comparison(inst, ["t1"], ["t2", "t4"])
    assert not diff["exact"] and diff["PASS_TO_PASS"] == {"match": False, "missing": ["t3"], "extra": ["t4"]}
    assert gold_comparison({"FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"}, ["t1"], []) is None  # nothing to compare
    # a gold test not passing is a miss the after-run log may explain (no network); an extra passing one is not
    assert misses_gold(diff) and not misses_gold(gold_comparison(inst, ["t1"], ["t2", "t3", "t4"]))
    assert misses_gold(gold_comparison(inst, [], ["t1", "t2", "t3"]))
