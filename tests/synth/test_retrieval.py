import numpy as np
import pytest

from core.errors import InputError, UserError
from synth.chunking import ChunkConfig, split_meta_chunks
from synth.retrieval import ChunkRef, JaccardIndex, RetrievalConfig, make_index


@pytest.fixture(scope="module")
def book_chunks(books):
    """About 900 real meta-chunks from six novels, each novel cut into 3 documents."""
    refs = []
    for b in books[:6]:
        for part in range(3):
            doc_id = f"{b['id']}#{part}"
            text = b["text"][part * 100_000 : part * 100_000 + 50_000]
            refs += [ChunkRef(doc_id, i, c) for i, c in enumerate(split_meta_chunks(text, ChunkConfig()))]
    return refs


def test_forest_neighbours_are_hard_negatives_like_brute_force_ones(book_chunks):
    """The LSH forest is approximate only in its candidates: its top-10 must be far closer (by
    exact Jaccard over the same shingles) than random chunks, and mostly the exact top-10."""
    cfg = RetrievalConfig()
    forest, exact = make_index(cfg), JaccardIndex(cfg)
    forest.add(book_chunks)
    exact.add(book_chunks)
    exact.build()
    rng = np.random.default_rng(0)

    def jaccard(a: str, b: str) -> float:
        sa, sb = exact._query_set(a), exact._query_set(b)
        return len(sa & sb) / len(sa | sb)

    got_j, want_j, random_j, recall = [], [], [], []
    for q in rng.choice(len(book_chunks), 30, replace=False):
        ref = book_chunks[int(q)]
        got = forest.query(ref.text, 10, exclude_docs={ref.doc_id})
        want = exact.query(ref.text, 10, exclude_docs={ref.doc_id})
        assert len(got) == 10 and all(r.doc_id != ref.doc_id for r, _ in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        got_j += [jaccard(ref.text, r.text) for r, _ in got]
        assert [s for _, s in got] == pytest.approx([jaccard(ref.text, r.text) for r, _ in got])  # exact scores
        recall.append(len({r.key for r, _ in got} & {r.key for r, _ in want}) / 10)
        want_j += [s for _, s in want]
        random_j += [jaccard(ref.text, book_chunks[int(i)].text) for i in rng.choice(len(book_chunks), 10)]
    assert np.mean(got_j) > 1.5 * np.mean(random_j), (np.mean(got_j), np.mean(random_j))
    assert np.mean(got_j) > 0.9 * np.mean(want_j), (np.mean(got_j), np.mean(want_j))
    assert np.mean(recall) > 0.8, np.mean(recall)  # datasketch's forest: 0.09 in benchmarks/longctx_retrieval.py
    assert exact._stop and b"the" in exact._stop  # corpus stop words are learnt, not listed


def test_query_with_a_chunks_own_text_returns_it_first(book_chunks):
    index = make_index(RetrievalConfig())
    index.add(book_chunks)
    for ref in book_chunks[::97]:
        (top, score), *_ = index.query(ref.text, 3)
        assert top.key == ref.key and score == 1.0
        skipped = index.query(ref.text, 3, exclude_keys={ref.key})
        assert ref.key not in {r.key for r, _ in skipped}


def test_empty_index_is_a_clear_error():
    for method in ("minhash_forest", "jaccard"):
        with pytest.raises(InputError, match="retrieval index is empty"):
            make_index(RetrievalConfig(method=method)).query("anything", 5)


def test_dense_retrieval_with_the_packaged_minilm(book_chunks):
    index = make_index(RetrievalConfig(method="dense"))
    index.add(book_chunks[::12])
    refs = index.refs
    for ref in refs[::15]:
        (top, score), *_ = index.query(ref.text, 2)
        assert top.key == ref.key and score > 0.99
        other = index.query(ref.text, 5, exclude_docs={ref.doc_id})
        assert len(other) == 5 and all(r.doc_id != ref.doc_id for r, _ in other)
        assert other[0][1] < score


def test_dense_model_missing_is_a_user_error(tmp_path):
    index = make_index(RetrievalConfig(method="dense", dense_model=str(tmp_path / "nope")))
    index.add([ChunkRef("d", 0, "some text here")])
    with pytest.raises(UserError, match="could not load the embedding model"):
        index.build()
