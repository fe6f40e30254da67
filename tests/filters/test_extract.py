from datatrove.data import Document

from core.records import get_reject
from filters.extract import HtmlToText
from pipelines.chain import StepChain


def html_doc(id_, html):
    return Document(text=html, id=id_, metadata={"content_type": "text/html"})


def test_real_documentation_page_is_extracted(sample_corpus):
    page = (sample_corpus.html_dir / "tutorial" / "classes.html").read_text()
    chain = StepChain([HtmlToText()])
    [doc] = list(chain.process([html_doc("classes", page)]))
    assert get_reject(doc) is None
    assert "namespace" in doc.text and "class" in doc.text
    assert "<div" not in doc.text and "Navigation" not in doc.text  # markup and nav are gone
    assert len(doc.text) < len(page) / 2
    assert doc.metadata["content_type"] == "text/plain" and doc.metadata["extracted_from"] == "text/html"


def test_plain_text_passes_through_and_empty_html_is_rejected_with_reason():
    plain = Document(text="A novel.\n\nChapter 1", id="book", metadata={"content_type": "text/plain"})
    empty = html_doc("empty", "<html><head><script>var x;</script></head><body></body></html>")
    out = {d.id: d for d in StepChain([HtmlToText()]).process([plain, empty])}
    assert get_reject(out["book"]) is None and out["book"].text == "A novel.\n\nChapter 1"
    assert get_reject(out["empty"]) == ("html_to_text", "no_text_extracted")


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
