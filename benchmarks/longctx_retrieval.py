"""Hard-negative retrieval: MinHash LSH Forest vs brute-force Jaccard on the same chunks.

Meta-chunks (~2K characters) of the sample corpus's novels (``--source demo``: the demo's kept
documents in ``out/demo/documents``, a few dozen chunks, too few for an index to pay; the default
does not depend on whether the demo ran, so runs compare) — indexed both ways with the same shingles
(word unigrams minus corpus stop words). Prints index build time, queries/s of each, their
ratio (baseline: brute force), and the quality of the forest's top-10: mean exact Jaccard
of its hits relative to the exact top-10's, and recall of the exact top-10.
Writes out/bench/longctx_retrieval.json. Run: `python benchmarks/longctx_retrieval.py [--chunks 4000 --queries 200 --source books|demo]`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _report import Result, write

from synth.chunking import ChunkConfig, split_meta_chunks
from synth.mrcr.passages import iter_documents
from synth.retrieval import ChunkRef, JaccardIndex, RetrievalConfig, make_index

ROOT = Path(__file__).resolve().parents[1]


def load_chunks(limit: int, which: str = "books") -> tuple[list[ChunkRef], str]:
    demo = ROOT / "out/demo/documents"
    if which == "demo":
        if not demo.is_dir():
            raise SystemExit(f"error: --source demo needs {demo} (run make demo first)")
        source, docs = str(demo), iter_documents(demo)
    else:
        from samples.corpus import SampleConfig, obtain_sample

        books = obtain_sample(SampleConfig(), log=lambda m: None).books_jsonl
        source, docs = (
            str(books),
            ((r["id"], r["text"], {}) for r in map(json.loads, books.read_text().splitlines())),
        )
    refs = [
        ChunkRef(d, i, c) for d, text, _ in docs for i, c in enumerate(split_meta_chunks(text, ChunkConfig()))
    ]
    stride = max(1, len(refs) // limit)
    return refs[::stride][:limit], source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chunks", type=int, default=4000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--source", choices=("books", "demo"), default="books")
    args = ap.parse_args()
    refs, source = load_chunks(args.chunks, args.source)
    cfg = RetrievalConfig()
    rng = np.random.default_rng(0)
    queries = [refs[int(i)] for i in rng.choice(len(refs), min(args.queries, len(refs)), replace=False)]
    results, timings = {}, {}
    for name, index in (("lsh_forest", make_index(cfg)), ("brute_force", JaccardIndex(cfg))):
        index.add(refs)
        t0 = time.perf_counter()
        index.build()
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        results[name] = [index.query(q.text, args.k, exclude_docs={q.doc_id}) for q in queries]
        timings[name] = (build, len(queries) / (time.perf_counter() - t0))
        if name == "brute_force":
            exact = index

    def jac(a: str, b: str) -> float:
        sa, sb = exact._query_set(a), exact._query_set(b)
        return len(sa & sb) / max(1, len(sa | sb))

    got = np.mean(
        [jac(q.text, r.text) for q, hits in zip(queries, results["lsh_forest"], strict=True) for r, _ in hits]
    )
    want = np.mean([s for hits in results["brute_force"] for _, s in hits])
    rand = np.mean([jac(q.text, refs[int(i)].text) for q in queries for i in rng.choice(len(refs), args.k)])
    recall = np.mean(
        [
            len({r.key for r, _ in a} & {r.key for r, _ in b}) / args.k
            for a, b in zip(results["lsh_forest"], results["brute_force"], strict=True)
        ]
    )
    print(
        f"{len(refs)} meta-chunks from {source}; {len(queries)} queries, top-{args.k}, other documents only"
    )
    for name, (build, qps) in timings.items():
        print(f"  {name:12s} build {build:6.2f}s   {qps:8.1f} queries/s")
    print(
        f"  top-{args.k} mean exact Jaccard: forest {got:.4f}, brute force {want:.4f}, random chunks {rand:.4f}"
    )
    print(f"  forest recall of the exact top-{args.k}: {recall:.2f}")
    print(
        f"ratio lsh_forest/brute_force: {timings['lsh_forest'][1] / timings['brute_force'][1]:.1f}x queries/s, "
        f"{got / want:.2f} of the exact neighbours' Jaccard, recall {recall:.2f} of the exact top-{args.k}"
    )
    write(
        __file__,
        Result("hard-negative retrieval", timings["lsh_forest"][1], timings["brute_force"][1], "queries/s",
               # the speed means little without the quality it buys: recall goes in the headline's label
               ours_label=f"MinHash LSH Forest (recall {recall:.2f} of the exact top-{args.k})",
               baseline_label="brute-force exact Jaccard",
               extra={"jaccard_of_exact": round(float(got / want), 4), "recall_of_exact_topk": round(float(recall), 4)}),
        {"chunks": len(refs), "queries": len(queries), "k": args.k, "source": str(source)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
