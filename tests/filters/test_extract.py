import pytest
from datatrove.data import Document

from core.records import get_reject
from filters.extract import BACKENDS, HtmlToText
from pipelines.chain import StepChain
from pipelines.charset import decode_page

ROOT_PAGES = ["tutorial/classes.html", "library/functions.html", "howto/logging.html"]


def html_doc(id_, html):
    return Document(text=html, id=id_, metadata={"content_type": "text/html"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_documentation_pages_are_extracted(sample_corpus, backend):
    pages = {rel: (sample_corpus.html_dir / rel).read_text() for rel in ROOT_PAGES}
    chain = StepChain([HtmlToText(backend=backend)])
    out = {d.id: d for d in chain.process([html_doc(rel, html) for rel, html in pages.items()])}
    for rel, doc in out.items():
        assert get_reject(doc) is None, rel
        assert "<div" not in doc.text and "Navigation" not in doc.text  # markup and the sidebar are gone
        assert len(doc.text) < len(pages[rel]) / 2
        assert doc.metadata["content_type"] == "text/plain" and doc.metadata["extracted_from"] == "text/html"
    assert "namespace" in out["tutorial/classes.html"].text
    assert chain.counts["html_to_text"].kept == len(pages)


@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_text_passes_through_and_empty_html_is_rejected_with_reason(backend):
    plain = Document(text="A novel.\n\nChapter 1", id="book", metadata={"content_type": "text/plain"})
    empty = html_doc("empty", "<html><head><script>var x;</script></head><body></body></html>")
    step = HtmlToText(backend=backend)
    out = {d.id: d for d in StepChain([step]).process([plain, empty])}
    assert get_reject(out["book"]) is None and out["book"].text == "A novel.\n\nChapter 1"
    assert get_reject(out["empty"]) == ("html_to_text", "no_text_extracted")
    assert step.stats["passthrough"].total == 1 and step.stats["dropped_no_text_extracted"].total == 1


def test_a_real_page_without_main_content_is_a_reject_with_reason(extraction_eval):
    """rnz.de's article page: Resiliparse's main-content rules find nothing in it (trafilatura
    does); the page becomes a reject named for why, not a silent loss."""
    folder, pages = extraction_eval
    page = next(p for p in pages if p.file == "rnz.de.witzel.html")
    html = decode_page((folder / page.file).read_bytes(), None).text
    out = {b: next(StepChain([HtmlToText(backend=b)]).process([html_doc("rnz", html)])) for b in BACKENDS}
    assert get_reject(out["resiliparse"]) == ("html_to_text", "no_text_extracted")
    assert get_reject(out["trafilatura"]) is None and "Für einen Roman" in out["trafilatura"].text


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="expected one of trafilatura, resiliparse"):
        HtmlToText(backend="readability")


def test_timeout_is_a_reject_not_a_loss():
    big = (
        "<html><body>"
        + "".join(f"<p>paragraph {i} with some words</p>" for i in range(40000))
        + "</body></html>"
    )
    chain = StepChain([HtmlToText(timeout=0.05)])
    out = list(chain.process([html_doc("slow", big), html_doc("ok", "<p>" + "short text " * 30 + "</p>")]))
    outcome = {d.id: get_reject(d) for d in out}
    assert outcome["slow"] == ("html_to_text", "extract_timeout")
    assert chain.counts["html_to_text"].docs_in == 2
