"""Run a document job on Spark: the same datatrove step objects inside ``mapInArrow`` (the
Spark side of ``pipelines.phase.DocPhase``).

The input file list becomes a small DataFrame (one row per file, spread over partitions);
one ``mapInArrow`` reads each partition's files with the same reader functions as the local
engine and pushes the documents through the same ``StepChain``. Its output rows carry
``stage``/``reason`` (null for kept documents); the persisted result is split into
``OUT/documents`` and ``OUT/rejects`` — the side output. Writes use ``mode("overwrite")``
so a re-run after a crash replaces partial outputs (idempotent).

Inputs must be readable from every executor (a shared filesystem on a cluster) and are named
by absolute path, or are URLs (``s3://``) each executor streams through fsspec itself, with the
driver's ``AWS_*`` settings (``core.storage.forward_storage_env``); the files steps load (models, tokenizers) are shipped by Spark itself
(``pipelines.spark_files``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from core.errors import UserError
from core.outputs import prepare_output
from core.records import REASON, STAGE, doc_to_row, get_reject, reject_schema, reject_to_row
from core.spark import SparkConfig, input_partitions, spark_schema, worker_error
from core.storage import forward_storage_env, is_url
from pipelines.chain import StepChain, merge_timings
from pipelines.inputs import InputFile, ReadLimits, list_input_files
from pipelines.job import DocJob, JobResult, Layout, finish
from pipelines.readers import read_files
from pipelines.spark_files import ship_step_files

BATCH_ROWS = 256


def _to_batch(docs, schema: pa.Schema, promoted) -> pa.RecordBatch:
    rows = []
    for d in docs:
        if get_reject(d) is None:
            row = doc_to_row(d, promoted)
            row[STAGE] = row[REASON] = None
        else:
            row = reject_to_row(d, promoted)
        rows.append(row)
    return pa.RecordBatch.from_pylist(rows, schema=schema)


class _TimingsSum:
    """Spark accumulator of the stages' times (pyspark's AccumulatorParam protocol): timing is not
    accounting, so a retried task adding twice only overstates the time, it loses no document."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):  # noqa: N802 - pyspark's name
        return {s: t.model_dump() for s, t in merge_timings([a, b]).items()}


def process_partition(
    batches: Iterator[pa.RecordBatch], chain: StepChain, limits: ReadLimits, schema: pa.Schema, world: int = 1,
    timings=None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: file rows in, document/reject rows out; the stages' times into the
    ``timings`` accumulator when given."""
    from pyspark import TaskContext

    files = [InputFile.model_validate_json(s) for b in batches for s in b.column("file").to_pylist()]
    chain.reset_counts()  # this task's own tally, should a worker hand one chain object to several tasks
    ctx = TaskContext.get()
    # steps see the partition as their rank, as datatrove steps see their task's rank
    rank = ctx.partitionId() if ctx is not None else 0
    buf = []
    for doc in chain.process(read_files(files, limits), rank, world):
        buf.append(doc)
        if len(buf) >= BATCH_ROWS:
            yield _to_batch(buf, schema, chain.promoted)
            buf = []
    if buf:
        yield _to_batch(buf, schema, chain.promoted)
    if timings is not None:
        timings.add({s: t.model_dump() for s, t in chain.timings.items()})


def run_spark(job: DocJob, out: str | Path | Layout, spark, cfg: SparkConfig | None = None,
              overwrite: bool = False) -> JobResult:
    """Run ``job`` into ``out`` (a directory, i.e. ``Layout.single(out)``, or a ``Layout``)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    cfg = cfg or SparkConfig()
    started = time.monotonic()
    layout = (out if isinstance(out, Layout) else Layout.single(out)).absolute()
    files = list_input_files(job.inputs)
    prepare_output(layout.state, job.fingerprint(files) | {"engine": "spark"}, overwrite,
                   (layout.documents, layout.rejects))
    # executors share neither the driver's cwd nor (on a cluster) its filesystem: inputs are
    # named by absolute path, and models/tokenizers travel with the job (SparkContext.addFile)
    files = [f if is_url(f.path) else f.model_copy(update={"path": os.path.abspath(f.path)}) for f in files]
    if any(is_url(f.path) for f in files):
        forward_storage_env(spark.sparkContext)
    chain = replace(job, steps=ship_step_files(job.steps, spark.sparkContext)).chain()
    schema = reject_schema(chain.promoted)
    n_parts = input_partitions(spark, cfg, len(files))
    rows = [(i, f.model_dump_json()) for i, f in enumerate(files)]
    files_df = spark.createDataFrame(spark.sparkContext.parallelize(rows, n_parts), "idx long, file string")
    limits = job.limits
    timings = spark.sparkContext.accumulator({}, _TimingsSum())

    def body(batches):
        return process_partition(batches, chain, limits, schema, n_parts, timings)

    result = files_df.mapInArrow(body, spark_schema(schema)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        kept = result.filter(F.col(STAGE).isNull()).drop(STAGE, REASON)
        kept.write.mode("overwrite").parquet(str(layout.documents))
        result.filter(F.col(STAGE).isNotNull()).write.mode("overwrite").parquet(str(layout.rejects))
    except Exception as err:
        raise UserError(f"Spark job {job.name!r} failed: {worker_error(err)} — re-run to redo it") from err
    finally:
        result.unpersist()
    # Counters inside executors die with their tasks (and would double-count retried tasks);
    # on Spark the written outputs are the accounting.
    return finish(job, "spark", layout, chain.stages, None, started, merge_timings([timings.value]))
