"""Document length bounds, the simplest quality rule; records ``n_chars`` as a typed column."""

from __future__ import annotations

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from core.config import StrictModel


class LengthConfig(StrictModel):
    min_chars: int = 200
    # ~ a long novel; longer texts are usually concatenated dumps, not documents
    max_chars: int = 5_000_000


class TextLength(BaseFilter):
    name = "📏 text_length"
    stage_name = "text_length"
    promotes = {"n_chars": "int64"}

    def __init__(self, cfg: LengthConfig | None = None):
        super().__init__()
        self.cfg = cfg or LengthConfig()

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        n = len(doc.text.strip())
        doc.metadata["n_chars"] = n
        if n < self.cfg.min_chars:
            return False, "too_short"
        if n > self.cfg.max_chars:
            return False, "too_long"
        return True
