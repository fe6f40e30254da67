"""Demo document pipeline throughput: datatrove local executor vs Spark local[2].

Same inputs (the real sample corpus, bounded), same step objects, run side by side in one
process; prints docs/s and MB/s for each engine and their ratio, and checks that both kept
the same documents. Writes out/bench/engines.json. Run: `python benchmarks/engines.py [--pages N]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
from _report import Result, write

from core.local_engine import LocalEngineConfig
from core.spark import SparkConfig, spark_session
from pipelines.inputs import list_input_files, sample_inputs
from pipelines.job import DocJob
from pipelines.jobs.documents import DocumentStepsConfig, build_document_steps
from pipelines.local import run_local
from pipelines.spark import run_spark
from samples.corpus import SampleConfig, obtain_sample


def kept_ids(out: Path) -> list[str]:
    q = f"SELECT id FROM read_parquet('{out}/documents/*.parquet') ORDER BY id"
    return [r[0] for r in duckdb.connect().execute(q).fetchall()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=200, help="HTML pages of the sample to use")
    ap.add_argument("--books", action="store_true", help="include the 10 novels (slower)")
    args = ap.parse_args()

    corpus = obtain_sample(SampleConfig(max_html_pages=args.pages, include_books=args.books))
    files = list_input_files(sample_inputs(corpus))
    mb = sum(Path(f.path).stat().st_size for f in files) / 1e6
    job = DocJob("bench", sample_inputs(corpus), build_document_steps(DocumentStepsConfig()))

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        local = run_local(job, Path(tmp) / "local", LocalEngineConfig(tasks=8, workers=2))
        results["datatrove local (2 workers)"] = time.perf_counter() - t0

        cfg = SparkConfig(master="local[2]", input_partitions=8)
        t0 = time.perf_counter()
        spark = spark_session(cfg)
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_spark(job, Path(tmp) / "spark", spark, cfg)
        results["spark local[2]"] = time.perf_counter() - t0
        same = kept_ids(Path(tmp) / "local") == kept_ids(Path(tmp) / "spark")
        spark.stop()

    n = local.counts["read"].docs_in
    print(f"{n} documents, {mb:.1f} MB of input; steps: {', '.join(local.stages[1:])}")
    for name, secs in results.items():
        print(f"  {name:28s} {secs:7.1f}s  {n / secs:7.1f} docs/s  {mb / secs:6.2f} MB/s")
    print(f"  (spark session startup {startup:.1f}s, not included)")
    base = results["datatrove local (2 workers)"]
    print(
        f"ratio spark/datatrove docs/s: {base / results['spark local[2]']:.2f}; identical kept documents: {same}"
    )
    write(
        __file__,
        Result("demo steps spark vs datatrove", n / results["spark local[2]"], n / base, "docs/s",
               ours_label="Spark local[2], steps in mapInArrow", baseline_label="datatrove LocalPipelineExecutor, 2 workers",
               extra={"identical_kept_documents": same}),
        {"documents": n, "mb": round(mb, 2), "pages": args.pages, "books": args.books,
         "spark_startup_s": round(startup, 1)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
