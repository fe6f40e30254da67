"""synth.mrcr.passages: a bad documents line is an error naming file and line."""

import pytest

from core.errors import InputError
from synth.mrcr import MrcrConfig, passage_pool


@pytest.mark.parametrize(
    ("line", "message"),
    [("{oops", r"d\.jsonl:2: invalid JSON"), ('{"id": "b"}', r"d\.jsonl:2: expected an object with a string 'text'")],
)
def test_bad_documents_line_names_file_and_line(tmp_path, line, message):
    docs = tmp_path / "d.jsonl"
    docs.write_text('{"id": "a", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        passage_pool([docs], MrcrConfig().passages)
