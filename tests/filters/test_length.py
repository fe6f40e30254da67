from datatrove.data import Document

from filters.length import LengthConfig, TextLength


def test_bounds_and_recorded_length():
    f = TextLength(LengthConfig(min_chars=5, max_chars=10))
    cases = {"abc": (False, "too_short"), "  abcdef  ": True, "x" * 11: (False, "too_long")}
    for text, expected in cases.items():
        doc = Document(text=text, id="d")
        assert f.filter(doc) == expected
        assert doc.metadata["n_chars"] == len(text.strip())
    assert TextLength.promotes == {"n_chars": "int64"}
