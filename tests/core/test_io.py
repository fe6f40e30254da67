"""core.io.read_jsonl: the one JSONL reader of user-given files (errors name file and line)."""

from __future__ import annotations

import pytest

from core.errors import InputError
from core.io import read_jsonl


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
