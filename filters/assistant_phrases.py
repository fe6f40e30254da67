"""Signatures of assistant-written and generated-boilerplate text (GLM-5: "strictly exclude
synthetic / AI-generated / templated data").

Chat models leave fingerprints that human web text almost never has: self-references
("As an AI language model"), service phrases ("I hope this helps!", "Certainly! Here is"),
knowledge-cutoff disclaimers, refusal boilerplate, and unfilled template slots
("[Your Name]", "{{placeholder}}", "Lorem ipsum"). A document is rejected when it carries a
strong signature, or enough weak ones per 1,000 words; the hits are recorded in metadata.

This is the rule-based third of the AI/templated-text exclusion; the trained human-vs-machine
classifier is ``filters.machine_text_classifier`` and the cross-document template detection
``filters.templates``.
"""

from __future__ import annotations

import re

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import Field

from core.config import StrictModel

# Strong: one occurrence is enough. Written as regexes over lowercased text.
STRONG = {
    "as_an_ai": r"\bas an ai(?: language)? model\b",
    "ai_self_reference": r"\bi(?:'m| am) (?:just )?an? (?:ai|artificial intelligence|language model)\b",
    "knowledge_cutoff": r"\b(?:as of|since) my (?:last )?(?:knowledge|training)(?: data)? (?:cutoff|update)\b",
    "cannot_browse": r"\bi (?:don't|do not|cannot|can't) (?:have the ability to )?(?:browse|access) the internet\b",
    "unfilled_slot": r"\[(?:your|insert|company|recipient'?s?) [a-z ]{2,30}\]",
    "template_braces": r"\{\{\s*[a-z_][a-z0-9_ ]{0,30}\}\}",
    "lorem_ipsum": r"\blorem ipsum dolor sit amet\b",
}
# Weak: common in assistant answers, occasionally in human text; counted per 1,000 words.
WEAK = {
    "certainly_here": r"(?:^|\n)\s*(?:certainly|sure|absolutely|of course)[!,.] (?:here(?:'s| is| are)|i(?:'d| would) be happy)",
    "hope_this_helps": r"\bi hope (?:this|that) (?:helps|was helpful|information helps)\b",
    "let_me_know": r"\blet me know if you (?:have any (?:other|more|further) questions|need (?:any )?(?:more|further|anything else))\b",
    "great_question": r"\b(?:great|excellent|good) question[!.]",
    "feel_free": r"\bfeel free to (?:ask|reach out)\b",
    "in_conclusion_overall": r"(?:^|\n)\s*(?:in conclusion|in summary|overall),",
    "delve": r"\bdelve(?:s|d)? (?:into|deeper)\b",
    "important_to_note": r"\bit(?:'s| is) (?:important|worth) (?:to note|noting)\b",
}
_STRONG = {k: re.compile(v) for k, v in STRONG.items()}
_WEAK = {k: re.compile(v) for k, v in WEAK.items()}


class AssistantPhrasesConfig(StrictModel):
    # weak signature hits per 1,000 words at or above which a document is rejected
    max_weak_per_1k_words: float = Field(default=2.0, gt=0)
    min_weak_hits: int = Field(default=2, ge=1)


def signature_hits(text: str) -> tuple[dict[str, int], dict[str, int]]:
    low = text.lower().replace("’", "'")
    strong = {k: len(p.findall(low)) for k, p in _STRONG.items()}
    weak = {k: len(p.findall(low)) for k, p in _WEAK.items()}
    return {k: v for k, v in strong.items() if v}, {k: v for k, v in weak.items() if v}


class AssistantPhrases(BaseFilter):
    name = "🤖 assistant_phrases"
    stage_name = "assistant_phrases"

    def __init__(self, cfg: AssistantPhrasesConfig | None = None):
        super().__init__()
        self.cfg = cfg or AssistantPhrasesConfig()

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        strong, weak = signature_hits(doc.text)
        if strong or weak:
            doc.metadata["ai_signatures"] = {**strong, **weak}
        if strong:
            return False, "assistant_phrase"
        n_weak = sum(weak.values())
        words = max(1, len(doc.text.split()))
        if n_weak >= self.cfg.min_weak_hits and n_weak * 1000 / words >= self.cfg.max_weak_per_1k_words:
            return False, "assistant_style"
        return True
