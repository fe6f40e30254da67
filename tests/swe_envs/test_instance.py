"""The one instance schema: what mining writes is what validation reads."""

import json

from swe_envs.instance import REQUIRED, missing_fields, new_instance, read_instances


def _mined(**over):
    fields = dict(instance_id="o__r-2", repo="o/r", base_commit="abc", problem_statement="p", hints_text="",
                  patch="diff a", test_patch="diff t", created_at="2020-01-01T00:00:00Z", pull_number=2,
                  issue_numbers=[1], issue_repo="o/r")
    return new_instance(**(fields | over))


def test_a_mined_instance_is_a_valid_input_of_validation(tmp_path):
    inst = _mined()
    assert missing_fields(inst) == [] and json.loads(inst["FAIL_TO_PASS"]) == []
    assert inst["environment_setup_commit"] == inst["base_commit"]
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(inst) + "\n" + json.dumps(_mined(instance_id="o__r-3", base_commit=None)) + "\n")
    good, bad = read_instances(path)
    assert [i["instance_id"] for i in good] == ["o__r-2"]
    assert bad == [{"instance_id": "o__r-3", "stage": "read", "reason": "missing field(s): base_commit"}]


def test_missing_fields_in_schema_order():
    assert missing_fields({}) == list(REQUIRED)
    assert missing_fields({"instance_id": "x", "repo": "", "patch": "p"}) == ["repo", "base_commit", "test_patch"]
