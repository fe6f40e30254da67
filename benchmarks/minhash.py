r"""MinHash throughput, side by side on the same real text (the sample's novels, in passages):

1. signature MB/s: ours (``Signer.signatures``: Arrow/numpy tokenising, vectorised hashing) vs
   the datasketch configuration whose signatures are *identical* to ours: a loop of
   ``MinHash(num_perm=112, seed=1, hashfunc=shingle_hash32).update_batch`` over word 5-gram
   shingles of ``re.findall(r"\w+")`` words (goal >= 8x). Every timed document's signature is
   compared with ours after the run. Shown next to it, labelled: datasketch with its default
   sha1 hash (other signatures, so not the headline) and datatrove's ``MinhashDedupSignature``;
2. the whole dedup (signatures, bands, connected components) on Spark local[2] vs local[1]
   (goal >= 1.7).

Writes out/bench/minhash.json. Run: `python benchmarks/minhash.py [--mb 8] [--no-spark]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _report import Result, write
from datasketch import MinHash
from datatrove.data import Document

from filters.minhash import MinhashConfig, Signer, shingle_hash32, shingle_hashes, words
from pipelines.jobs.quality_data import passages
from samples.corpus import SampleConfig, obtain_sample

ROUNDS = 3  # interleaved local[1]/local[2] rounds of the Spark scaling measurement


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=8.0, help="MB of text to sign (the sample's novels hold ~9)")
    ap.add_argument("--no-spark", action="store_true")
    # 16 copies (~110 MB): at 4 (~30 MB) the whole dedup took 3 s, Spark's per-job overheads dominated
    # and the local[2]/local[1] rounds scattered from 0.97 to 1.73 (2026-12-03)
    ap.add_argument("--spark-copies", type=int, default=16, help="copies of the text in the Spark corpus")
    args = ap.parse_args()
    corpus = obtain_sample(SampleConfig())
    books = [json.loads(x)["text"] for x in corpus.books_jsonl.read_text().splitlines()]
    texts, size = [], 0
    for p in passages(books, 600):
        texts.append(p)
        size += len(p)
        if size >= args.mb * 1e6:
            break
    mb = size / 1e6
    cfg = MinhashConfig()
    signer = Signer(cfg)
    ours_sigs: list = []

    def ours():  # in Arrow-batch-sized groups, as the local and Spark dedup call it
        ours_sigs.clear()
        for i in range(0, len(texts), 512):
            ours_sigs.extend(signer.signatures(texts[i : i + 512]))

    def ours_one_by_one():  # each call compiles Arrow's split regex again: batches are the API
        for t in texts:
            signer.signature(shingle_hashes(t, cfg.ngram))

    def plain_words(text: str) -> list[str]:  # what a plain datasketch user writes
        return re.findall(r"\w+", text.lower())

    base_sigs: list = []

    def datasketch_loop(hashfunc=shingle_hash32, keep=True):
        base_sigs.clear()
        for t in texts:
            ws = plain_words(t)
            m = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=hashfunc, scheme="affine32")
            m.update_batch([" ".join(ws[i : i + 5]).encode() for i in range(len(ws) - 4)])
            if keep:
                base_sigs.append(m.hashvalues)

    def datatrove_step():
        from datatrove.pipeline.dedup.minhash import MinhashConfig as DtConfig
        from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

        with tempfile.TemporaryDirectory() as tmp:
            step = MinhashDedupSignature(tmp, config=DtConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8))
            step.run((Document(text=t, id=str(i)) for i, t in enumerate(texts)))

    # same words on this text (ours split in numpy/Arrow, the baseline with Python's re)
    assert all(words(t) == plain_words(t) for t in texts)
    t_ours, t_ds = best_of(ours), best_of(datasketch_loop)
    # ... and the same signatures, document by document, for everything just timed
    assert len(ours_sigs) == len(base_sigs) == len(texts)
    same = all(np.array_equal(a, b) for a, b in zip(ours_sigs, base_sigs, strict=True))
    assert same, "signatures differ from datasketch's"
    t_sha1 = best_of(lambda: datasketch_loop(hashfunc=None, keep=False))
    t_one = best_of(ours_one_by_one)
    t_dt = best_of(datatrove_step, 1)
    t_tok = best_of(lambda: [plain_words(t) for t in texts])  # the baseline's tokeniser alone
    print(f"{len(texts)} passages, {mb:.1f} MB; all {len(texts)} signatures identical to datasketch's: {same}")
    print(f"  ours (batches of 512 docs)           {mb / t_ours:6.2f} MB/s")
    print(f"  ours (one document per call)         {mb / t_one:6.2f} MB/s")
    print(f"  datasketch, hashfunc=shingle_hash32  {mb / t_ds:6.2f} MB/s  (identical signatures: the baseline)")
    print(f"  datasketch, default sha1             {mb / t_sha1:6.2f} MB/s  (other signatures)")
    print(f"  datatrove MinhashDedupSignature      {mb / t_dt:6.2f} MB/s")
    print(f"  the baseline's tokenising (Python re) alone: {t_tok:.2f}s of its {t_ds:.2f}s; ours in all: {t_ours:.2f}s")
    ds_label = "datasketch update_batch loop, hashfunc=shingle_hash32 (identical signatures)"
    headline = Result("minhash signatures", mb / t_ours, mb / t_ds, "MB/s", goal=8.0,
                      ours_label="Signer.signatures, batches of 512", baseline_label=ds_label)  # fmt: skip
    also = [
        Result("minhash vs datasketch sha1", mb / t_ours, mb / t_sha1, "MB/s",
               ours_label="Signer.signatures", baseline_label="datasketch default sha1 (different signatures)"),
        Result("minhash one doc per call", mb / t_one, mb / t_ds, "MB/s",
               ours_label="Signer.signature per document", baseline_label=ds_label),
        Result("minhash vs datatrove", mb / t_ours, mb / t_dt, "MB/s",
               ours_label="Signer.signatures", baseline_label="datatrove MinhashDedupSignature (its own hash)"),
    ]  # fmt: skip
    inputs = {"passages": len(texts), "mb": round(mb, 2), "text": "sample novels, 600-word passages",
              "num_perm": cfg.num_perm, "ngram": cfg.ngram}  # fmt: skip

    if not args.no_spark:
        also += spark_scaling(texts, cfg, mb, args.spark_copies)
        inputs["spark_copies"] = args.spark_copies
    write(__file__, headline, inputs, also)


def spark_scaling(texts: list[str], cfg: MinhashConfig, mb: float, copies: int) -> list[Result]:
    from core.spark import SparkConfig, spark_session
    from filters.minhash_clusters import _key_rows, clusters_spark

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "docs"
        d.mkdir()
        # the passages `copies` times under new ids: each passage becomes a cluster of that
        # many duplicates, and there is enough work for two cores to matter
        spark_texts = texts * copies
        for part in range(8):
            chunk = spark_texts[part::8]
            pq.write_table(pa.table({"id": [f"p{part}-{i}" for i in range(len(chunk))], "text": chunk,
                                     "metadata": ["{}"] * len(chunk)}), d / f"{part:05d}.parquet")
        # rounds interleave the two masters, so load from other jobs falls on both alike; the figure is
        # the medians of the rounds (a single pair once gave 2.39x on 2 cores: faster than linear)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(ROUNDS):
            for master in ("local[1]", "local[2]"):
                spark = spark_session(SparkConfig(master=master, shuffle_partitions=8))
                df = spark.read.parquet(str(d))
                clusters_spark(df, cfg)  # warm the Python workers
                keys = df.select("id", "text").mapInArrow(lambda it: _key_rows(it, cfg), "id string, key bigint")
                times.setdefault((master, "keys"), []).append(best_of(lambda keys=keys: keys.count(), 1))
                times.setdefault((master, "all"), []).append(best_of(lambda df=df: clusters_spark(df, cfg), 1))
                spark.stop()
    total = mb * copies
    print(f"Spark corpus: {len(spark_texts)} passages, {total:.0f} MB; {os.cpu_count()} cores, {ROUNDS} rounds")
    out = []
    for part, what in (("keys", "band keys (mapInArrow)"), ("all", "whole dedup (keys, joins, components)")):
        ones, twos = times["local[1]", part], times["local[2]", part]
        ratios = sorted(a / b for a, b in zip(ones, twos, strict=True))
        mid = statistics.median(ratios)
        one, two = statistics.median(ones), statistics.median(twos)
        print(f"{what} on Spark: local[1] {one:.1f}s, local[2] {two:.1f}s (medians); ratios per round "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; median {mid:.2f} (goal >= 1.7)")
        res = Result(f"spark {what.split(' (')[0]} local[2]/local[1]", total / two, total / one, "MB/s",
                     goal=1.7, ours_label="local[2]", baseline_label="local[1]",
                     notes=f"median of {ROUNDS} interleaved rounds on {os.cpu_count()} cores",
                     extra={"round_ratios": [round(r, 3) for r in ratios], "cores": os.cpu_count()})
        out.append(res)  # ratio: of the median rates; each round's own ratio is kept beside it
    return out


if __name__ == "__main__":
    main()
