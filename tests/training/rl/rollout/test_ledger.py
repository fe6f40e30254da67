"""The ledger refuses double accounting and its audit finds lost, duplicated and reasonless rows."""

from __future__ import annotations

import json

import pytest

from training.rl.rollout.ledger import Ledger, LedgerError, audit


def test_ledger_accounts_once_and_survives_reopen(tmp_path):
    led = Ledger(tmp_path)
    for i in range(3):
        led.issue(f"t{i}", "copy", "g0")
    led.record("t0", "trained", None, update=1)
    led.record("t1", "dropped", "stale")
    with pytest.raises(LedgerError, match="already trained"):
        led.record("t0", "dropped", "failed:generate:timeout")
    with pytest.raises(LedgerError, match="without a reason"):
        led.record("t2", "dropped", None)
    with pytest.raises(LedgerError, match="never issued"):
        led.record("nope", "trained")
    with pytest.raises(LedgerError, match="issued twice"):
        led.issue("t1", "copy", "g0")
    led.close()
    again = Ledger(tmp_path)  # a reopened ledger still refuses a second row for t0
    assert again.open_ids() == ["t2"]
    with pytest.raises(LedgerError):
        again.record("t0", "trained")
    again.record("t2", "dropped", "run_ended")
    again.close()
    report = audit(tmp_path)
    assert report["ok"] and report["issued"] == 3 == report["rows"]
    assert report["by_reason"] == {"trained": 1, "stale": 1, "run_ended": 1}


def test_audit_reports_every_kind_of_bad_accounting(tmp_path):
    (tmp_path / "issued.jsonl").write_text("".join(json.dumps({"id": f"t{i}", "task": "x"}) + "\n" for i in range(4)))
    rows = [{"id": "t0", "status": "trained"}, {"id": "t0", "status": "trained"},
            {"id": "t1", "status": "dropped", "reason": None}, {"id": "zz", "status": "trained"}]
    (tmp_path / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    report = audit(tmp_path)
    assert not report["ok"]
    assert report["duplicated"] == ["t0"] and report["lost"] == ["t2", "t3"]
    assert report["unknown"] == ["zz"] and report["dropped_without_reason"] == ["t1"]


def test_close_open_drops_only_what_is_still_open(tmp_path):
    led = Ledger(tmp_path)
    led.issue("a", "copy", "g"), led.issue("b", "copy", "g")
    led.record("a", "trained")
    assert led.close_open("a", "run_ended") is False and led.close_open("b", "run_ended") is True
    assert led.close_open("b", "run_ended") is False
    led.close()
    assert audit(tmp_path)["by_reason"] == {"trained": 1, "run_ended": 1}


def test_reopen_survives_a_row_torn_inside_a_character(tmp_path):
    led = Ledger(tmp_path)
    led.issue("t0", "copy", "g0")
    led.issue("t1", "copy", "g0")
    led.record("t0", "trained", None, update=1)
    led.close()
    with open(tmp_path / "ledger.jsonl", "ab") as fh:  # the writer was killed inside "é"
        fh.write(b'{"id": "t1", "status": "dropped", "reason": "caf\xc3')
    again = Ledger(tmp_path)  # the torn row is not counted: t1 is still open and is re-accounted
    assert again.open_ids() == ["t1"]
    again.record("t1", "dropped", "run_ended")
    again.close()
