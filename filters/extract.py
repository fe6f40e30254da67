"""HTML -> text, dropping with reasons: trafilatura (datatrove's extractor) or Resiliparse.

datatrove's ``BaseExtractor.run`` drops documents on timeout, extractor error or empty output
without saying why; this step runs the extraction in datatrove's ``ExtractorSandbox``
(per-document timeout, isolated process) and records the reason of every drop in
``metadata["filter_reason"]`` so the step chain turns it into a reject. Both backends go through
the same sandbox, so they drop for the same reasons and count the same stats.
Documents that are not HTML (``metadata["content_type"]`` other than ``text/html``) pass
through unchanged: one corpus can mix crawled pages and plain-text books.

Backends, measured by ``benchmarks/extractors.py`` (docs/web.md has the figures): trafilatura
is the more precise (less boilerplate kept), Resiliparse (``resiliparse.extract.html2text``,
main-content mode, the extractor DCLM's pool was built with) an order of magnitude faster.
"""

from __future__ import annotations

import re
from typing import Literal

from datatrove.pipeline.extractors.base import ExtractorSandbox
from datatrove.pipeline.extractors.trafilatura import Trafilatura

from core.records import REJECT_DETAIL_KEY

HTML_TYPES = {"text/html", "application/xhtml+xml"}
ExtractBackend = Literal["trafilatura", "resiliparse"]
BACKENDS: tuple[str, ...] = ExtractBackend.__args__


def resiliparse_text(html: str) -> str:
    """Resiliparse's main-content text. Comments off, as datatrove's trafilatura call has them;
    image alt texts and post metadata (author, date lines) off: on trafilatura's labelled pages
    they only added boilerplate (precision 0.79 -> 0.84, recall unchanged)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, comments=False, alt_texts=False, post_meta=False)


class HtmlToText(Trafilatura):
    name = "⛏ html_to_text"
    stage_name = "html_to_text"

    def __init__(
        self,
        timeout: float = 10.0,
        favour_precision: bool = True,
        deduplicate: bool = True,
        backend: ExtractBackend = "trafilatura",  # the web job picks its own default (configs/web.yaml)
        **kwargs,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"extract backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        super().__init__(
            favour_precision=favour_precision, timeout=timeout, deduplicate=deduplicate, **kwargs
        )
        self.backend = backend

    def extract(self, text: str) -> str:
        return resiliparse_text(text) if self.backend == "resiliparse" else super().extract(text)

    def run(self, data, rank: int = 0, world_size: int = 1):
        with ExtractorSandbox(timeout=self.timeout, warmup_text="") as sandbox:
            for doc in data:
                if doc.metadata.get("content_type") not in HTML_TYPES:
                    self.stat_update("passthrough")
                    yield doc
                    continue
                self.stat_update("total")
                with self.track_time():
                    try:
                        text = sandbox.process_document(doc.text, self.extract)
                    except TimeoutError:
                        self._drop(doc, "extract_timeout", f"{self.backend} took over {self.timeout}s")
                        continue
                    except EOFError:
                        self._drop(doc, "extract_crashed", "extractor process died (out of memory?)")
                        continue
                    except Exception as err:  # trafilatura/lxml and Resiliparse raise many types on broken HTML
                        self._drop(doc, "extract_error", f"{type(err).__name__}: {err}")
                        continue
                if not text or not text.strip():
                    self._drop(doc, "no_text_extracted", None)
                    continue
                doc.text = text
                doc.metadata["content_type"] = "text/plain"
                doc.metadata["extracted_from"] = "text/html"
                self.stat_update("forwarded")
                yield doc

    def _drop(self, doc, reason: str, detail: str | None) -> None:
        self.stat_update("dropped", f"dropped_{reason}")
        doc.metadata["filter_reason"] = reason
        if detail:
            doc.metadata[REJECT_DETAIL_KEY] = detail


# Page chrome by HTML semantics: landmark elements/roles and the class/id names sites use
# for navigation, sidebars, headers and footers. What they contain is boilerplate by
# construction, which makes it real negative data for a quality classifier.
_CHROME_TAGS = ("nav", "header", "footer", "aside")
_CHROME_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search")
_CHROME_NAME = re.compile(r"(^|[-_ ])(nav|navbar|menu|sidebar|sphinxsidebar|footer|header|breadcrumbs?|related|toc)"
                          r"([-_ ]|$)", re.IGNORECASE)


def boilerplate_text(html: str) -> str:
    """Text of a page's navigation/chrome regions (one line per region), '' if none."""
    import lxml.html

    try:
        tree = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return ""
    for bad in tree.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    regions = []
    for el in tree.iter():
        if not isinstance(el.tag, str):
            continue
        names = f"{el.get('class', '')} {el.get('id', '')}"
        if el.tag in _CHROME_TAGS or el.get("role") in _CHROME_ROLES or _CHROME_NAME.search(names):
            if any(el is r or r in el.iterancestors() for r in regions):
                continue  # nested inside a region we already took
            regions.append(el)
    lines = [" ".join(r.text_content().split()) for r in regions]
    return "\n".join(line for line in lines if line)
