import json

import numpy as np
import pyarrow as pa
import pytest
from datasketch import MinHash

from filters.minhash import MinhashConfig, Signer, estimated_jaccard, shingle_hash32, shingle_hashes, words
from pipelines.jobs.quality_data import passages


@pytest.fixture(scope="module")
def texts(sample_corpus):
    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    return list(passages(books[:4], 300))[::20][:80]


def test_signatures_are_datasketch_signatures(texts):
    cfg = MinhashConfig()
    signer = Signer(cfg)
    for text in texts[:10] + ["Tiny doc here.", "one"]:
        ws = words(text)
        n = min(cfg.ngram, len(ws))
        shingles = [" ".join(ws[i : i + n]).encode() for i in range(len(ws) - n + 1)]
        ref = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=shingle_hash32)
        ref.update_batch(shingles)
        assert (signer.signature(shingle_hashes(text, cfg.ngram)) == ref.hashvalues).all()
    assert signer.signature(shingle_hashes("", 5)) is None and signer.keys_for("  ") == []
    assert len(signer.keys_for(texts[0])) == cfg.bands
    assert abs(cfg.threshold() - 0.68) < 0.01




def test_words_are_unicode_letter_digit_runs_lowercased():
    assert words("Ça va? Naïve café_1 — 東京 2024! x² İstanbul") == [
        "ça", "va", "naïve", "café_1", "東京", "2024", "x²", "istanbul"]
    assert words("") == [] and words(" ,;- ") == []
    # on plain English prose the same words as Python's \w+ (what a datasketch user writes)
    import re

    text = "It's 9 o'clock -- the well-known Mr. Darcy_II arrived, didn't he?"
    assert words(text) == re.findall(r"\w+", text.lower())

def test_ascii_fast_path_gives_the_regex_words_in_mixed_batches(texts):
    """ASCII documents are tokenised through a byte table, the others through Unicode lowercasing
    and RE2; in a batch mixing both, every document must get exactly the regex's words, in order."""
    import pyarrow.compute as pc

    from filters.minhash import _NON_WORD, _split

    batch = [texts[0], "Ça va? Naïve café_1 — 東京", "", "ASCII\tonly,\x00 CAPS_and_digits 42!",
             "  ", "İstanbul’s “quotes” x²", texts[1][:200], "\u00a0nbsp\u2003em\u2009thin", "Z"]
    regex = pc.split_pattern_regex(pc.utf8_lower(pa.array(batch, pa.large_string())), _NON_WORD)
    got = _split(batch).to_pylist()
    assert [[w for w in ws if w] for ws in got] == [[w for w in ws if w] for ws in regex.to_pylist()]
    assert [w for w in got[5] if w] == ["istanbul", "s", "quotes", "x²"]
    # the per-shingle hash (datasketch's hashfunc) agrees with the vectorised one on Unicode words
    for text in batch[1::4]:
        ws = words(text)
        assert [shingle_hash32(" ".join(ws[i : i + 2]).encode()) for i in range(len(ws) - 1)] == \
            shingle_hashes(text, 2).tolist()


@pytest.mark.parametrize("block", [37, 8192])
def test_batched_signatures_equal_one_at_a_time(texts, block):
    """Empty, shorter-than-n, and long documents mixed; a small block makes documents straddle
    permutation blocks, so the per-document reduction across blocks is exercised."""
    cfg = MinhashConfig(block=block)
    signer = Signer(cfg)
    batch = ["", texts[0], "two words", "  ", texts[1] * 3, "one", texts[2], "a b c d e", "a b c d e f"]
    got = signer.signatures(batch)
    assert len(got) == len(batch)
    for text, sig in zip(batch, got, strict=True):
        ref = signer.signature(shingle_hashes(text, cfg.ngram))
        assert (sig is None) == (ref is None), text
        if ref is not None:
            assert sig.dtype == np.uint32 and (sig == ref).all(), text
    assert signer.keys_for_many(batch) == [signer.keys_for(t) for t in batch]
    assert signer.signatures([]) == [] and signer.signatures(["", " "]) == [None, None]


def test_estimated_jaccard_is_the_fraction_of_equal_values(texts):
    signer = Signer(MinhashConfig())
    a = signer.text_signature(texts[0])
    b = a.copy()
    b[: len(b) // 4] += 1
    assert estimated_jaccard(a, a) == 1.0 and estimated_jaccard(a, b) == 0.75
    assert signer.text_signature("") is None and (signer.text_signature(texts[1]) == signer.signatures([texts[1]])[0]).all()
