"""HTML -> text with trafilatura (datatrove's extractor), dropping with reasons.

datatrove's ``BaseExtractor.run`` drops documents on timeout, extractor error or empty output
without saying why; this step runs the same trafilatura extraction in datatrove's
``ExtractorSandbox`` (per-document timeout, isolated process) and records the reason of every
drop in ``metadata["filter_reason"]`` so the step chain turns it into a reject.
Documents that are not HTML (``metadata["content_type"]`` other than ``text/html``) pass
through unchanged: one corpus can mix crawled pages and plain-text books.
"""

from __future__ import annotations

import re

from datatrove.pipeline.extractors.base import ExtractorSandbox
from datatrove.pipeline.extractors.trafilatura import Trafilatura

from core.records import REJECT_DETAIL_KEY

HTML_TYPES = {"text/html", "application/xhtml+xml"}


class HtmlToText(Trafilatura):
    name = "⛏ html_to_text"
    stage_name = "html_to_text"

    def __init__(
        self, timeout: float = 10.0, favour_precision: bool = True, deduplicate: bool = True, **kwargs
    ):
        super().__init__(
            favour_precision=favour_precision, timeout=timeout, deduplicate=deduplicate, **kwargs
        )

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
                        self._drop(doc, "extract_timeout", f"trafilatura took over {self.timeout}s")
                        continue
                    except EOFError:
                        self._drop(doc, "extract_crashed", "extractor process died (out of memory?)")
                        continue
                    except Exception as err:  # trafilatura/lxml raise many types on broken HTML
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
