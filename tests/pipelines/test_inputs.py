"""Which files a job reads: expansion of InputSpecs, format detection, one-line errors."""

import pytest

from core.errors import InputError
from pipelines.inputs import InputSpec, list_input_files


def test_files_are_sorted_deduplicated_and_named_by_source(tmp_path):
    (tmp_path / "b.jsonl").write_text("{}\n")
    (tmp_path / "a.html").write_text("<p>a</p>")
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "00000.parquet").write_bytes(b"")
    (tmp_path / "parts" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "parts" / ".part.crc").write_bytes(b"")
    specs = [InputSpec(path=str(tmp_path / "b.jsonl")), InputSpec(path=str(tmp_path), glob="*.*")]
    files = list_input_files(specs)
    assert [(f.relpath, f.source, f.format) for f in files] == [
        ("b.jsonl", "b", "jsonl"), ("a.html", tmp_path.name, "html"), ("parts/00000.parquet", tmp_path.name, "parquet")]
    # a written documents dataset: only its Parquet parts, not Spark's bookkeeping beside them
    docs = list_input_files([InputSpec(path=str(tmp_path / "parts"), format="documents", source="p")])
    assert [(f.relpath, f.format) for f in docs] == [("00000.parquet", "documents")]


def test_missing_and_unknown_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match=f"input path does not exist: {tmp_path / 'nope'}"):
        list_input_files([InputSpec(path=str(tmp_path / "nope"))])
    (tmp_path / "x.bin").write_bytes(b"1")
    with pytest.raises(InputError, match="unknown document format"):
        list_input_files([InputSpec(path=str(tmp_path / "x.bin"))])
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="no document files"):
        list_input_files([InputSpec(path=str(tmp_path / "d"))])
