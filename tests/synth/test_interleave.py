from collections import Counter

import pytest

from synth.chunking import ChunkConfig, split_meta_chunks
from synth.interleave import InterleaveConfig, TargetUnreachable, TooShort, interleave_document
from synth.retrieval import ChunkRef, RetrievalConfig, make_index


def char_lengths(texts: list[str]) -> list[int]:
    return [len(t) for t in texts]


@pytest.fixture(scope="module")
def index(books):
    """Meta-chunks of nine novels (lengths in characters), the tenth is left to interleave."""
    idx = make_index(RetrievalConfig())
    for b in books[1:]:
        chunks = split_meta_chunks(b["text"][:120_000], ChunkConfig())
        idx.add(ChunkRef(b["id"], i, c, len(c)) for i, c in enumerate(chunks))
    return idx.build()


def test_interleaves_hard_negatives_between_the_original_chunks(books, index):
    doc = books[0]
    text = doc["text"][50_000:58_000]
    cfg = InterleaveConfig()
    sample = interleave_document(doc["id"], text, index, 40_000, char_lengths, cfg)
    originals = [s for s in sample.segments if s.kind == "original"]
    distractors = [s for s in sample.segments if s.kind == "distractor"]
    # the document is all there, in order, and the sample reaches the target
    assert "".join(s.text for s in originals) == text
    assert [s.chunk_index for s in originals] == list(range(len(originals)))
    assert sample.length >= 40_000 and sample.segments[0].kind == "original"
    # distractors come from other documents, never twice, spread evenly over the gaps
    assert all(s.doc_id != doc["id"] for s in distractors)
    assert len({(s.doc_id, s.chunk_index) for s in distractors}) == len(distractors)
    gaps, cur = [], 0
    for s in sample.segments[1:]:
        if s.kind == "original":
            gaps.append(cur)
            cur = 0
        else:
            cur += 1
    gaps.append(cur)
    assert max(gaps) - min(gaps) <= 1 and min(gaps) >= 1
    # hard negatives: each is a retrieval hit for its own original chunk
    pos = 0
    for i, s in enumerate(sample.segments):
        if s.kind == "original":
            own = {
                r.key for r, _ in index.query(s.text, cfg.max_distractors_per_chunk, exclude_docs={doc["id"]})
            }
            pos = i
        else:
            assert (s.doc_id, s.chunk_index) in own, (i, pos)

    spans = sample.original_spans()
    assembled = "".join(s.text for s in sample.segments)
    assert [assembled[a:b] for a, b in spans] == [s.text for s in originals]
    assert sample.metadata()["original_spans"] == spans


def test_trim_cuts_only_distractors_to_hit_the_target_exactly(books, index):
    doc = books[0]
    sample = interleave_document(
        doc["id"], doc["text"][:6000], index, 20_000, char_lengths, InterleaveConfig()
    )
    before = [(s.kind, s.length) for s in sample.segments if s.kind == "original"]
    sample.trim_to(20_000)
    assert sample.length == 20_000
    assert [(s.kind, s.length) for s in sample.segments if s.kind == "original"] == before


def test_short_documents_and_unreachable_targets_are_clear_errors(books, index):
    cfg = InterleaveConfig(chunk=ChunkConfig(chunk_chars=2000, min_chunk_chars=200))
    with pytest.raises(TooShort, match="shorter than one meta-chunk"):
        interleave_document("tiny", "A short note.\n", index, 10_000, char_lengths, cfg)
    small = make_index(RetrievalConfig())
    small.add(
        ChunkRef("other", i, c, len(c))
        for i, c in enumerate(split_meta_chunks(books[1]["text"][:6000], ChunkConfig()))
    )
    with pytest.raises(TargetUnreachable) as err:
        interleave_document(books[0]["id"], books[0]["text"][:3000], small, 100_000, char_lengths, cfg)
    assert err.value.reached < err.value.target == 100_000
    assert f"reached {err.value.reached} of 100000" in str(err.value) and "\n" not in str(err.value)
    # everything the small index has went in (no repeats, none from the document itself)
    assert err.value.reached == 3000 + sum(len(r.text) for r in small.refs)


def test_a_document_already_long_enough_gets_no_distractors(books, index):
    text = books[0]["text"][:10_000]
    sample = interleave_document("long", text, index, 5_000, char_lengths, InterleaveConfig())
    assert Counter(s.kind for s in sample.segments) == Counter({"original": len(sample.segments)})
