"""core.io.read_jsonl: the one JSONL reader of user-given files (errors name file and line)."""

from __future__ import annotations

import pytest

from core.errors import InputError
from core.io import (
    atomic_write_text,
    iter_jsonl,
    numbered_jsonl,
    parsed_lines,
    read_jsonl,
    write_jsonl_atomic,
)


def test_objects_in_order_and_blank_lines_skipped(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n\n  \n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(p, "tasks") == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"a": 1}\n{oops\n', r"a\.jsonl:2: invalid JSON"), ('{"a": 1}\n[1, 2]\n', r"a\.jsonl:2: expected a JSON object")],
)
def test_bad_line_names_file_and_line(tmp_path, text, message):
    p = tmp_path / "a.jsonl"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_jsonl(p, "tasks")


def test_missing_file_names_what_it_is(tmp_path):
    with pytest.raises(InputError, match="responses file not found"):
        read_jsonl(tmp_path / "nope.jsonl", "responses")


def test_iter_jsonl_streams_and_fails_at_the_bad_line(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\nnot json\n', encoding="utf-8")
    rows = iter_jsonl(p, "events")
    assert next(rows) == {"a": 1} and next(rows) == {"a": 2}  # read before the bad line
    with pytest.raises(InputError, match=r"a\.jsonl:3: invalid JSON"):
        next(rows)


def test_write_jsonl_atomic_round_trips_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "sub" / "out.jsonl"
    rows = [{"a": 1, "t": "é"}, {"b": [1, 2]}]
    assert write_jsonl_atomic(p, rows) == 2
    assert read_jsonl(p, "rows") == rows
    assert [x.name for x in p.parent.iterdir()] == ["out.jsonl"]


def test_atomic_write_text_replaces_whole_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "state.json"
    p.write_text("old and longer than the new text", encoding="utf-8")
    atomic_write_text(p, "new é")
    assert p.read_text(encoding="utf-8") == "new é"
    assert [x.name for x in tmp_path.iterdir()] == ["state.json"]


def test_numbered_jsonl_gives_the_line_of_each_object(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert list(numbered_jsonl(p, "rows")) == [(1, {"a": 1}), (3, {"a": 2})]


def test_parsed_lines_keeps_going_past_a_bad_line():
    """The lenient form the SWE readers use: a bad line is reported with its number, not raised."""
    got = list(parsed_lines(['{"a": 1}', "", "{oops", "[1]"]))
    assert [(n, v) for n, v, _ in got] == [(1, {"a": 1}), (3, None), (4, [1])]
    assert got[1][2] is not None and got[0][2] is None and got[2][2] is None
