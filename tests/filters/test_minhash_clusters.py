"""Clusters of MinHash band collisions, with and without the Jaccard check, locally and on Spark."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datatrove.data import Document

from filters.minhash import MinhashConfig, Signer, estimated_jaccard, words
from filters.minhash_clusters import (
    MinhashDuplicates,
    cluster_id,
    clusters_from_documents,
    clusters_local,
    clusters_spark,
    clusters_verified,
    clusters_verified_spark,
)
from pipelines.jobs.dedup_eval import plant
from pipelines.jobs.quality_data import passages


@pytest.fixture(scope="module")
def texts(sample_corpus):
    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    return list(passages(books[:4], 300))[::20][:80]


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


def test_jaccard_check_drops_candidates_below_it(texts):
    docs = corpus(texts, random.Random(0))
    signer = Signer(MinhashConfig())
    sigs = dict(zip(docs, signer.signatures(list(docs.values())), strict=True))
    plain = clusters_local((d, signer.band_keys(s)) for d, s in sigs.items())
    # a check every candidate passes gives the plain clusters
    assert clusters_verified(sigs.items(), signer, 0.0) == plain
    # the near copy (J~0.9) survives a 0.7 check
    got = clusters_verified(sigs.items(), signer, 0.7)
    assert got["x_near_of_d000"] == ("d000", 2)
    near = estimated_jaccard(sigs["d000"], sigs["x_near_of_d000"])
    assert "x_near_of_d000" not in clusters_verified(sigs.items(), signer, near + 1e-9)
    # a document without words has no signature and matches nothing
    assert clusters_verified([("a", None), ("b", None)], signer, 0.0) == {}


@pytest.mark.spark
def test_spark_gives_identical_verified_clusters(texts, spark):
    docs = corpus(texts, random.Random(2))
    signer = Signer(MinhashConfig())
    rows = [
        (d, None if s is None else s.tobytes(), [] if s is None else signer.band_keys(s))
        for d, s in zip(docs, signer.signatures(list(docs.values())), strict=True)
    ]
    df = spark.createDataFrame(rows, "id string, sig binary, keys array<bigint>")
    for min_jaccard in (0.0, 0.7):
        local = clusters_verified(((d, signer.signatures([docs[d]])[0]) for d in docs), signer, min_jaccard)
        assert clusters_verified_spark(df, min_jaccard) == local and len(local) >= 2
