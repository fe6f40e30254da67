"""Is an issue a usable problem statement? Text measures and bot detection.

The prose of an issue is what is left after removing issue-template scaffolding (HTML
comments, headings, check boxes, bold labels), links, fenced code and stack-trace lines.
A short prose is rejected with the most specific reason: ``link_only`` (the body was mostly
links), ``template_only`` (an untouched template), ``stack_trace_only`` (a pasted trace and
nothing else), else ``text_too_short`` / ``too_few_words``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from swe_envs.mining.language import detect_language

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+|www\.\S+")
_TEMPLATE_LINE = re.compile(
    r"^\s*(?:#{1,6}\s.*|[-*]\s*\[[ xX]?\]\s*.*|\*\*[^*]{1,80}\*\*:?\s*|[-*_=]{3,}|>?\s*(?:n/?a|none|no|-)\s*)$",
    re.IGNORECASE,
)
_TRACE_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):"
    r"|File \".*\", line \d+.*"
    r"|at [\w$.<>/\[\]]+\(.*\)"  # JVM
    r"|at .+[:(]\d+:\d+\)?"  # node
    r"|at .+ in .+:line \d+"  # .NET
    r"|Caused by: .*"
    r"|\.\.\. \d+ more"
    r"|goroutine \d+ \[.*"
    r"|/.+\.go:\d+.*"
    r"|thread '.*' panicked at.*"
    r"|#\d+\s+0x[0-9a-fA-F]+.*"
    r"|[\w.]+(?:Error|Exception|Warning)(?::.*)?)\s*$"
)
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass
class TextReport:
    raw_chars: int
    prose: str
    prose_chars: int
    words: int
    link_chars: int
    template_lines: int
    trace_fraction: float
    language: str
    language_score: float


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def analyze(title: str, body: str) -> TextReport:
    body = body or ""
    trace_lines = [ln for ln in _lines(body) if _TRACE_LINE.match(ln)]
    all_lines = _lines(body)
    no_comments = _HTML_COMMENT.sub("\n", body)
    kept, template_lines = [], 0
    for ln in _FENCED.sub("\n", no_comments).splitlines():
        if not ln.strip():
            continue
        if _TEMPLATE_LINE.match(ln):
            template_lines += 1
        elif not _TRACE_LINE.match(ln):
            kept.append(ln)
    prose_body = "\n".join(kept)
    link_chars = sum(len(m.group(0)) for m in _URL.finditer(prose_body))
    prose_body = _URL.sub(" ", _MD_LINK.sub(r"\1", prose_body))
    prose = f"{title.strip()}\n{prose_body.strip()}".strip()
    prose = re.sub(r"[ \t]+", " ", prose)
    lang, score = detect_language(prose)
    return TextReport(
        raw_chars=len(title) + len(body),
        prose=prose,
        prose_chars=len(prose),
        words=len(_WORDS.findall(prose)),
        link_chars=link_chars,
        template_lines=template_lines,
        trace_fraction=len(trace_lines) / len(all_lines) if all_lines else 0.0,
        language=lang,
        language_score=score,
    )


def text_problem(
    r: TextReport, min_chars: int, min_words: int, max_chars: int, max_trace_fraction: float
) -> str | None:
    """The reason an issue text is not a usable problem statement, or None."""
    if r.raw_chars > max_chars:
        return "text_too_long"
    if r.trace_fraction > max_trace_fraction and r.prose_chars < 2 * min_chars:
        return "stack_trace_only"
    if r.prose_chars >= min_chars and r.words >= min_words:
        return None
    if r.link_chars and r.link_chars >= r.prose_chars:
        return "link_only"
    if r.template_lines >= 3:
        return "template_only"
    if r.trace_fraction > 0.5:
        return "stack_trace_only"
    return "text_too_short" if r.prose_chars < min_chars else "too_few_words"


def is_bot(login: str | None, user_type: str | None, logins: list[str], patterns: list[str]) -> bool:
    if user_type == "Bot":
        return True
    if not login:
        return False
    name = login.lower()
    if name in {b.lower() for b in logins}:
        return True
    return any(re.search(p, name) for p in patterns)
