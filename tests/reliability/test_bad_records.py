"""Seen in use: one JSONL line whose text holds a JSON-escaped lone surrogate stopped
`python -m pipelines documents` with UnicodeEncodeError, and the message blamed another (valid)
document. A bad record is one counted reject with its reason; an error names its real cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep

from core.errors import StepError
from pipelines.chain import StepChain
from pipelines.inputs import InputFile, ReadLimits
from pipelines.readers import read_file

ROOT = Path(__file__).resolve().parents[2]
PROSE = ("Gardeners plant tomatoes after the last frost, water them deeply once a week and stake the "
         "vines so the fruit stays off the soil. ")
# the exact shape of the reported line: the lone surrogate is JSON-escaped, the file is valid UTF-8
SURROGATE_LINE = '{"id": "bad-surrogate", "text": "\\udcff' + PROSE * 3 + '"}'


def _jsonl(path: Path) -> Path:
    lines = [json.dumps({"id": "good-1", "text": PROSE * 3}), SURROGATE_LINE,
             json.dumps({"id": "good-2", "text": PROSE * 3}),
             '{"id": "bad-key", "text": "fine", "meta\\ud800": 1}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_lone_surrogate_is_one_counted_reject_in_the_documents_job(tmp_path):
    src = _jsonl(tmp_path / "crawl.jsonl")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines", "documents", "--input", str(src), "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    read = json.loads((out / "job.json").read_text())["counts"]["read"]
    assert read == {"docs_in": 4, "kept": 2, "rejected": 2, "reasons": {"invalid_unicode": 2}}
    rejects = pq.read_table(out / "rejects").to_pylist()
    bad = {r["id"]: r for r in rejects if r["stage"] == "read"}
    assert set(bad) == {"bad-surrogate", "bad-key"}
    detail = json.loads(bad["bad-surrogate"]["metadata"])["reject_detail"]
    assert "text[0]: U+DCFF" in detail and "#L2" in detail
    assert bad["bad-surrogate"]["text"].startswith("\ufffdGardeners")  # kept for inspection, writable
    kept = pq.read_table(out / "documents").column("id").to_pylist() if (out / "documents").exists() else []
    assert len(kept) + len(rejects) == 4


def test_reader_accounts_for_every_line(tmp_path):
    f = InputFile(path=str(_jsonl(tmp_path / "x.jsonl")), relpath="x.jsonl", source="x", format="jsonl")
    docs = list(read_file(f, ReadLimits()))
    assert [d.id for d in docs] == ["good-1", "bad-surrogate", "good-2", "bad-key"]
    assert [d.metadata.get("__reject__", {}).get("reason") for d in docs] == [
        None, "invalid_unicode", None, "invalid_unicode"]


class Boom(PipelineStep):
    def run(self, data, rank=0, world_size=1):
        for d in data:
            if d.id == "b":
                raise ValueError("boom")
            yield d


def _broken_reader():
    yield Document(text="one", id="a")
    raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")


def test_a_reader_failure_is_blamed_on_the_reader_not_the_last_good_document():
    with pytest.raises(StepError, match=r"stage 'read' failed after document 'a': UnicodeEncodeError"):
        list(StepChain([Boom()]).process(_broken_reader()))


def test_a_step_failure_names_the_document_it_held():
    docs = [Document(text="x", id=i) for i in "abc"]
    with pytest.raises(StepError, match=r"stage 'boom' failed on document 'b': ValueError: boom"):
        list(StepChain([Boom()]).process(docs))


@pytest.mark.parametrize("charset, body", [("unicode_escape", b"\\udcff caf\xe9 au lait"),
                                           ("utf-7", b"+2D8- caf\xe9 au lait")])
def test_a_declared_charset_that_decodes_to_lone_surrogates_is_not_used(tmp_path, charset, body):
    page = tmp_path / "p.html"
    page.write_bytes(f'<html><head><meta charset="{charset}"></head><body><p>'.encode() + body)
    [doc] = read_file(InputFile(path=str(page), relpath="p.html", source="s", format="html"), ReadLimits())
    assert "\udcff" not in doc.text and "\ud83f" not in doc.text
    assert doc.metadata.get("encoding") != charset


def test_api_objects_with_lone_surrogates_are_one_reject_on_every_path():
    """Found by `make fuzz`: the surrogate check ran only for objects of a response list, so an
    object rejected for its shape named a surrogate key in its reject (`{"\\ud800": null}`), and a
    PR's file list (/pulls/N/files) with one went into observations no UTF-8 writer can store."""
    from swe_envs.mining.api_dumps import _files_obs, _guard, object_observations
    from swe_envs.mining.observations import Bad

    shape = _guard(object_observations, {"\ud800": None}, "", "")
    files = _guard(_files_obs, [{"filename": "src/a\udcff.py", "status": "added", "additions": 1}],
                   "https://api.github.com/repos/o/r/pulls/7/files", "")
    for bad in (shape, files):
        assert isinstance(bad, Bad) and bad.reason == "invalid_unicode"
        json.dumps([bad.detail, bad.text, bad.meta], ensure_ascii=False).encode("utf-8")
