"""Run a document job on datatrove's ``LocalPipelineExecutor`` (or its Slurm sibling): the
local side of ``pipelines.phase.DocPhase``.

The datatrove pipeline is ``[DocumentReader, ChainWriter]``: the reader shards input files
by rank; ``ChainWriter`` runs the job's steps through ``StepChain`` and writes kept documents
and rejects with datatrove's ``ParquetWriter``. Completion markers under ``OUT/logs`` let a
re-run skip finished tasks (resume after a crash).

Entry points that call ``run_local`` need ``if __name__ == "__main__":`` — the executor's
workers start through forkserver and re-import the main module.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from types import MethodType

import pyarrow.parquet as pq
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers import ParquetWriter

from core.errors import UserError
from core.io import atomic_write_text
from core.local_engine import LocalEngineConfig
from core.outputs import prepare_output
from core.records import doc_to_row, document_schema, get_reject, reject_schema, reject_to_row
from pipelines.chain import StageCounts, StepChain, merge_counts, merge_timings
from pipelines.inputs import list_input_files
from pipelines.job import DOCUMENTS, REJECTS, DocJob, JobResult, Layout, finish
from pipelines.readers import DocumentReader

COUNTS, TIMINGS = "counts", "timings"


def _doc_adapter(promoted, writer, document):
    return doc_to_row(document, promoted)


def _reject_adapter(promoted, writer, document):
    return reject_to_row(document, promoted)


class ChainWriter(PipelineStep):
    """Terminal datatrove step: run the chain, write kept docs, rejects and this rank's counts."""

    name = "🔗 step chain"
    type = "🔗 - CHAIN"

    def __init__(self, chain: StepChain, layout: Layout):
        super().__init__()
        self.chain = chain
        self.layout = layout

    def _writer(self, folder: str, schema, adapter) -> ParquetWriter:
        w = ParquetWriter(folder, output_filename="${rank}.parquet", schema=schema, max_file_size=-1)
        # datatrove binds adapters as methods; bind ours with the promoted columns
        w.adapter = MethodType(partial(adapter, self.chain.promoted), w)
        return w

    def run(self, data, rank: int = 0, world_size: int = 1):
        promoted = self.chain.promoted
        self.chain.reset_counts()
        written = {DOCUMENTS: 0, REJECTS: 0}
        dirs = {DOCUMENTS: self.layout.documents, REJECTS: self.layout.rejects}
        schemas = {DOCUMENTS: document_schema(promoted), REJECTS: reject_schema(promoted)}
        docs_w = self._writer(str(dirs[DOCUMENTS]), schemas[DOCUMENTS], _doc_adapter)
        rej_w = self._writer(str(dirs[REJECTS]), schemas[REJECTS], _reject_adapter)
        with docs_w, rej_w:
            for doc in self.chain.process(data or [], rank, world_size):
                kind = DOCUMENTS if get_reject(doc) is None else REJECTS
                (docs_w if kind == DOCUMENTS else rej_w).write(doc, rank)
                written[kind] += 1
                self.stat_update(kind)
        # every rank leaves a (possibly empty) file, so readers can glob a complete dataset
        for kind, n in written.items():
            path = dirs[kind] / f"{rank:05d}.parquet"
            if n == 0:
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(schemas[kind].empty_table(), path)
        counts = {s: c.model_dump() for s, c in self.chain.counts.items()}
        (self.layout.state / COUNTS).mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.layout.state / COUNTS / f"{rank:05d}.json", json.dumps(counts, indent=1))
        timings = {s: t.model_dump() for s, t in self.chain.timings.items()}
        (self.layout.state / TIMINGS).mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.layout.state / TIMINGS / f"{rank:05d}.json", json.dumps(timings, indent=1))
        return
        yield  # a generator: datatrove chains steps by iterating them


def run_local(job: DocJob, out: str | Path | Layout, cfg: LocalEngineConfig, overwrite: bool = False) -> JobResult:
    """Run ``job`` into ``out`` (a directory, i.e. ``Layout.single(out)``, or a ``Layout``)."""
    started = time.monotonic()
    layout = out if isinstance(out, Layout) else Layout.single(out)
    files = list_input_files(job.inputs)
    tasks = min(cfg.tasks, len(files))
    chain = job.chain()
    prepare_output(layout.state, job.fingerprint(files) | {"engine": "local", "tasks": tasks}, overwrite,
                   (layout.documents, layout.rejects))
    logs = layout.state / "logs"
    executor = LocalPipelineExecutor(
        pipeline=[DocumentReader(files, job.limits), ChainWriter(chain, layout)],
        tasks=tasks,
        workers=min(cfg.workers, tasks),
        logging_dir=str(logs),
        skip_completed=True,
    )
    try:
        executor.run()
    except Exception as err:
        raise UserError(f"job {job.name!r} failed: {err} (task logs: {logs / 'logs'})") from err
    parts = []
    for rank in range(tasks):
        path = layout.state / COUNTS / f"{rank:05d}.json"
        if not path.is_file():
            raise UserError(f"task {rank} left no counts at {path}; its output is incomplete — re-run to resume")
        raw = json.loads(path.read_text())
        parts.append({s: StageCounts.model_validate(c) for s, c in raw.items()})
    live = merge_counts(chain.stages, parts)
    # a task finished before this process started (resume) kept its own times
    times = [json.loads(p.read_text()) for p in sorted((layout.state / TIMINGS).glob("*.json"))]
    return finish(job, "local", layout, chain.stages, live, started, merge_timings(times))
