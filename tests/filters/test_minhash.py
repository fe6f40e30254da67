import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketch import MinHash
from datatrove.data import Document

from filters.minhash import (
    MinhashConfig,
    MinhashDuplicates,
    Signer,
    cluster_id,
    clusters_from_documents,
    clusters_local,
    clusters_spark,
    shingle_hash32,
    shingle_hashes,
    words,
)
from pipelines.dedup_eval import plant
from pipelines.quality_data import passages


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

def corpus(texts, rng):
    """Real passages plus planted copies: near (J~0.9), chained (a~b~c), and far (J~0.3)."""
    vocab = [w for t in texts[60:] for w in words(t)]
    docs = {f"d{i:03d}": " ".join(words(t)) for i, t in enumerate(texts[:40])}
    near, j = plant(words(texts[0]), 0.9, vocab, 5, rng)
    docs["x_near_of_d000"] = " ".join(near)
    chain1, _ = plant(words(texts[1]), 0.9, vocab, 5, rng)
    chain2, _ = plant(chain1, 0.9, vocab, 5, rng)
    docs["a_chain1"], docs["z_chain2"] = " ".join(chain1), " ".join(chain2)
    far, jf = plant(words(texts[2]), 0.3, vocab, 5, rng)
    docs["y_far_of_d002"] = " ".join(far)
    assert j > 0.85 and jf < 0.35
    return docs


def test_clusters_keep_the_smallest_id(texts):
    docs = corpus(texts, random.Random(0))
    signer = Signer(MinhashConfig())
    got = clusters_local((d, signer.keys_for(t)) for d, t in docs.items())
    assert got["x_near_of_d000"] == ("d000", 2) and got["d000"] == ("d000", 2)
    # d001 ~ a_chain1 ~ z_chain2: one component even if d001 and z_chain2 do not collide directly
    assert {got[k] for k in ("d001", "a_chain1", "z_chain2")} == {("a_chain1", 3)}
    assert "y_far_of_d002" not in got and "d005" not in got
    step = MinhashDuplicates(got)
    kept, dup = Document(text="", id="d000"), Document(text="", id="x_near_of_d000")
    assert step.filter(kept) is True and step.filter(dup) == (False, "near_duplicate")
    assert dup.metadata["duplicate_of"] == "d000" and dup.metadata["minhash_cluster"] == cluster_id("d000")
    alone = Document(text="", id="d007")
    assert step.filter(alone) is True and alone.metadata["minhash_cluster_size"] == 1


@pytest.mark.spark
def test_spark_gives_identical_clusters(texts, spark, tmp_path):
    docs = corpus(texts, random.Random(1))
    d = tmp_path / "docs"
    d.mkdir()
    ids = sorted(docs)
    for part in range(3):  # several files, several partitions
        chunk = ids[part::3]
        pq.write_table(pa.table({"id": chunk, "text": [docs[i] for i in chunk], "metadata": ["{}"] * len(chunk)}),
                       d / f"{part:05d}.parquet")
    cfg = MinhashConfig()
    local = clusters_from_documents(str(d), cfg)
    df = spark.read.parquet(str(d))
    assert clusters_spark(df, cfg) == local  # components joined on the driver
    assert clusters_spark(df, cfg, driver_edges=0) == local  # too many links: label propagation in Spark
    assert len(local) >= 5
