import json

from datatrove.data import Document

from filters.assistant_phrases import AssistantPhrases, signature_hits
from pipelines.jobs.quality_data import passages


def test_assistant_signatures_are_caught():
    cases = {
        "As an AI language model, I cannot give legal advice.": "assistant_phrase",
        "I'm an AI and do not have personal opinions.": "assistant_phrase",
        "As of my last knowledge update in 2021, the library was maintained.": "assistant_phrase",
        "Dear [Recipient's Name],\nThank you for your interest.": "assistant_phrase",
        "Hello {{ first_name }}, your order shipped.": "assistant_phrase",
        ("Certainly! Here is a summary of the topic.\n" + "The process has three parts. " * 20
         + "I hope this helps! Let me know if you have any other questions."): "assistant_style",
    }
    step = AssistantPhrases()
    for text, reason in cases.items():
        doc = Document(text=text, id="x")
        assert step.filter(doc) == (False, reason), text
        assert doc.metadata["ai_signatures"]


def test_real_human_prose_is_not_flagged(sample_corpus):
    """Precision on 10 real novels and 100 documentation pages: nothing is flagged."""
    step = AssistantPhrases()
    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    flagged = [p[:80] for p in passages(books, 400) if step.filter(Document(text=p, id="b")) is not True]
    assert flagged == []
    weak_only = signature_hits("It is important to note that the parser is lazy.")
    assert weak_only == ({}, {"important_to_note": 1})
    # one weak phrase in a long document is not enough to reject it
    assert step.filter(Document(text="It is important to note that the parser is lazy. " + "word " * 300, id="w")) is True
