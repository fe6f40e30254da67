"""The extractor benchmark's scoring: trafilatura's evaluation counts over labelled segments."""

from benchmarks.extractors import score
from samples.extraction_eval import LabelledPage, Segment


def test_segments_found_and_missed_are_counted_as_trafilatura_scores_them():
    pages = [LabelledPage("u1", "a.html", [Segment("main one", True), Segment("main two", True),
                                           Segment("Impressum", False), Segment("missed by all", True, commented=True)]),
             LabelledPage("u2", "b.html", [Segment("body", True), Segment("Teilen", False)])]
    texts = ["main one\nImpressum", ""]  # the second page: nothing extracted finds nothing
    s = score(pages, texts)
    assert (s["tp"], s["fn"], s["fp"], s["tn"]) == (1, 2, 1, 1)
    assert (s["precision"], s["recall"], s["accuracy"]) == (0.5, round(1 / 3, 4), 0.4)
    assert s["f1"] == round(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3), 4)
    assert score(pages, texts, commented=True)["fn"] == 3  # the commented-out segment counts too
