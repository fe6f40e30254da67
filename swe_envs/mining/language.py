"""Language of an issue text, from writing system and spaCy's stop-word lists.

No language-ID model can be downloaded at run time, but spaCy ships stop-word lists for
~80 languages as plain Python sets. Each list is loaded straight from its file (importing
``spacy`` itself takes seconds per worker). CJK / Hangul / Kana / Cyrillic / Greek / Arabic /
Hebrew / Devanagari text is placed by script; Latin-script text by the share of its words
that are stop words of each candidate language (English issues run at 30–50%).
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

LATIN_CANDIDATES = (
    "en",
    "de",
    "fr",
    "es",
    "pt",
    "it",
    "nl",
    "sv",
    "da",
    "nb",
    "pl",
    "cs",
    "tr",
    "id",
    "ro",
    "fi",
    "hu",
    "ca",
)
CYRILLIC_CANDIDATES = ("ru", "uk", "bg", "sr", "mk")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_SCRIPTS = (
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("ko", re.compile(r"[\uac00-\ud7af]")),
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("cyrillic", re.compile(r"[\u0400-\u04ff]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
)


@cache
def stop_words(lang: str) -> frozenset[str]:
    spec = importlib.util.find_spec("spacy")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("spaCy is not installed; it provides the stop-word lists")
    path = Path(list(spec.submodule_search_locations)[0]) / "lang" / lang / "stop_words.py"
    if not path.is_file():
        return frozenset()
    namespace: dict = {}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # a plain set literal
    return frozenset(w.lower() for w in namespace.get("STOP_WORDS", ()))


def detect_language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code or "unknown", score in [0, 1])."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "unknown", 0.0
    counts = {name: len(rx.findall(text)) for name, rx in _SCRIPTS}
    name, n = max(counts.items(), key=lambda kv: kv[1])
    share = n / len(letters)
    if share > 0.3 and name != "cyrillic":
        if name == "zh" and counts["ja"] > 0.05 * len(letters):
            return "ja", share
        return name, share
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return "unknown", 0.0
    candidates = CYRILLIC_CANDIDATES if name == "cyrillic" and share > 0.3 else LATIN_CANDIDATES
    best, best_score = "unknown", 0.0
    for lang in candidates:
        sw = stop_words(lang)
        score = sum(1 for w in words if w in sw) / len(words)
        if score > best_score:
            best, best_score = lang, score
    return best, best_score
