"""The whole-job benchmark's own logic: the WARC it writes is read alike by both readers, and the
decision check compares only pages both sides gave the heuristics with the same text."""

from datatrove.pipeline.readers import WarcReader

from benchmarks.web_vs_datatrove import decision_check, page_key, write_pages_warc
from core.records import get_reject
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.readers import read_files


def test_both_readers_read_the_written_warc_with_the_same_keys_and_html(tmp_path):
    pages = [("https://a.example/x", "text/html; charset=utf-8", "<html><body><p>Grüße aus Köln</p></body></html>".encode()),
             ("https://b.example/", "text/html", b"<html><body><p>plain</p></body></html>")]
    write_pages_warc(tmp_path / "p.warc.gz", pages)
    ours = [d for d in read_files(list_input_files([InputSpec(path=str(tmp_path))]), ReadLimits())]
    theirs = list(WarcReader(str(tmp_path)).run())
    assert [get_reject(d)[1] for d in ours if get_reject(d)] == ["request_record"] * 2
    kept = [d for d in ours if get_reject(d) is None]
    assert [page_key(d) for d in kept] == [page_key(d) for d in theirs]
    assert [d.text for d in kept] == [d.text for d in theirs] == [b.decode() for _, _, b in pages]
    assert {page_key(d)[0] for d in kept} == {"p.warc.gz"}


def test_decisions_are_compared_on_pages_given_the_same_text_only():
    ours = {"a": ("h1", None), "b": ("h2", 1), "c": ("h3", 0), "d": ("h4", None)}
    theirs = {"a": ("h1", None), "b": ("h2", 2), "c": ("other", None), "e": ("h5", None)}
    check = decision_check(ours, theirs)
    assert check == {"ours_at_heuristics": 4, "datatrove_at_heuristics": 4, "same_text": 2, "disagreements": 1,
                     "kept_by_heuristics_ours": 1, "kept_by_heuristics_datatrove": 1}
