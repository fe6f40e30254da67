"""The reliability table's file: `make chaos` writes rows {area, tried, contained, escaped} with each attempt."""

from __future__ import annotations

import json

from tests.reliability.ledger import Ledger


def test_rows_count_contained_and_escaped_attempts_with_their_reasons(tmp_path):
    ledger = Ledger()
    ledger.attempt("containment: parsers", "fork", True, "crash: PermissionError")
    ledger.attempt("containment: parsers", "socket", False, "ESCAPED: connected")
    ledger.add("readers", tried=5, faults=2)
    path = tmp_path / "chaos.json"
    ledger.write(path)
    rows = {r["area"]: r for r in json.loads(path.read_text())["rows"]}
    assert {k: rows["containment: parsers"][k] for k in ("tried", "contained", "escaped")} == {
        "tried": 2, "contained": 1, "escaped": 1}
    assert [a["reason"] for a in rows["containment: parsers"]["attempts"]] == ["crash: PermissionError",
                                                                             "ESCAPED: connected"]
    assert rows["readers"]["tried"] == 5 and rows["readers"]["escaped"] == 0 and rows["readers"]["attempts"] == []
