"""A document job is data: inputs, a list of per-document steps, read limits.

Both engines take the same ``DocJob`` and write the same output ``Layout``; for a one-phase
job (``Layout.single``):

    OUT/documents/*.parquet   kept documents  (id, text, metadata JSON, promoted columns)
    OUT/rejects/*.parquet     rejected ones   (same columns + stage, reason)
    OUT/job.json              engine, stages, per-stage counts, timings

Multi-phase jobs (per-document phases separated by corpus-level passes) give each phase
its own state directory and rejects partition (``Layout.phase``); the last phase writes
``OUT/documents``.

Per-stage counts are re-derived from the written outputs and compared with the counters
the step chain kept while running; a mismatch means a document was lost and fails the job.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from datatrove.pipeline.base import PipelineStep

from core.io import atomic_write_text
from core.records import READ_FLAGS
from pipelines.chain import StageCounts, StageTiming, StepChain, check_balanced, describe_step
from pipelines.inputs import InputFile, InputSpec, ReadLimits

DOCUMENTS, REJECTS, JOB_JSON = "documents", "rejects", "job.json"


@dataclass(frozen=True)
class Layout:
    """Where one per-document run writes: its state (fingerprint, logs, counts, job.json),
    its kept documents and its rejects."""

    state: Path
    documents: Path
    rejects: Path

    @classmethod
    def single(cls, out: str | Path) -> Layout:
        out = Path(out)
        return cls(out, out / DOCUMENTS, out / REJECTS)

    @classmethod
    def phase(cls, out: str | Path, index: int, name: str, final: bool) -> Layout:
        out = Path(out)
        state = out / "phases" / f"{index}-{name}"
        return cls(state, out / DOCUMENTS if final else state / DOCUMENTS, out / REJECTS / f"phase={index}-{name}")

    def absolute(self) -> Layout:
        return Layout(self.state.absolute(), self.documents.absolute(), self.rejects.absolute())


@dataclass
class DocJob:
    name: str
    inputs: list[InputSpec]
    steps: list[PipelineStep]
    limits: ReadLimits = field(default_factory=ReadLimits)
    # the producing config, recorded in job.json and in shard manifests
    config: dict[str, Any] = field(default_factory=dict)
    # typed columns to keep writing (promoted by earlier phases of a multi-phase job)
    promote: dict[str, str] = field(default_factory=dict)

    def chain(self) -> StepChain:
        return StepChain(self.steps, reject_text_chars=self.limits.reject_text_chars, promote=self.promote)

    def fingerprint(self, files: list[InputFile]) -> dict[str, Any]:
        return {
            "job": self.name,
            "config": self.config,
            "steps": [describe_step(s) for s in self.steps],
            "limits": self.limits.model_dump(),
            "promote": self.promote,
            "files": [f.path for f in files],
        }


@dataclass
class JobResult:
    name: str
    engine: str
    layout: Layout
    stages: list[str]
    counts: dict[str, StageCounts]
    seconds: float
    # each stage's own time and input bytes, as the engine measured them (not accounting: never compared)
    timings: dict[str, StageTiming] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.counts[self.stages[-1]].kept

    @property
    def out_dir(self) -> Path:
        return self.layout.state

    @property
    def documents_dir(self) -> Path:
        return self.layout.documents

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "engine": self.engine,
            "stages": self.stages,
            "counts": {s: self.counts[s].model_dump() for s in self.stages},
            "seconds": round(self.seconds, 3),
            **({"timings": {s: self.timings[s].model_dump() for s in self.stages if s in self.timings}}
               if self.timings else {}),
        }


def rejected_by_stage(con, rejects: str | Path, stages: list[str]) -> dict[str, dict[str, int]]:
    """Rejects per stage and reason in a rejects dataset (a directory of Parquet parts); a stage
    the job does not have fails the job."""
    rows = con.execute(
        f"SELECT stage, reason, count(*) FROM read_parquet('{rejects}/*.parquet') GROUP BY 1, 2"
    ).fetchall()
    rejected: dict[str, dict[str, int]] = {s: {} for s in stages}
    for stage, reason, n in rows:
        if stage not in rejected:
            raise AssertionError(f"rejects name an unknown stage {stage!r} (job stages: {stages})")
        rejected[stage][reason] = n
    return rejected


def stage_counts(stages: list[str], rejected: dict[str, dict[str, int]], entering: dict[str, int]
                 ) -> dict[str, StageCounts]:
    """The one stage count: each stage saw what the stage before it kept, except where
    ``entering`` says how many units came in (the first stage; a stage whose unit changes, as
    the miner's records become links, then pairs); in = kept + rejected by construction."""
    counts: dict[str, StageCounts] = {}
    kept = 0
    for s in stages:
        n_rej = sum(rejected[s].values())
        docs_in = entering.get(s, kept)
        kept = docs_in - n_rej
        if kept < 0:  # the one way a loss can show here
            raise AssertionError(f"stage {s}: {n_rej} rejected out of {docs_in}")
        counts[s] = StageCounts(docs_in=docs_in, kept=kept, rejected=n_rej, reasons=dict(sorted(rejected[s].items())))
    return counts


def counts_from_outputs(layout: Layout, stages: list[str]) -> dict[str, StageCounts]:
    """Per-stage counts derived only from what was written (DuckDB over the Parquet files)."""
    con = duckdb.connect()
    kept = con.execute(f"SELECT count(*) FROM read_parquet('{layout.documents}/*.parquet')").fetchone()[0]
    rejected = rejected_by_stage(con, layout.rejects, stages)
    total = kept + sum(sum(r.values()) for r in rejected.values())
    counts = stage_counts(stages, rejected, {stages[0]: total} if stages else {})
    if stages:
        counts[stages[0]].flags = _read_flags(con, layout)
    return counts


def _read_flags(con, layout: Layout) -> dict[str, int]:
    """How many documents, kept or rejected anywhere, carry each reader flag (``read_flags``).
    The LIKE spares parsing the metadata of the (usual) rows without one."""
    sources = ", ".join(f"'{d}/*.parquet'" for d in (layout.documents, layout.rejects))
    rows = con.execute(
        f"SELECT flag, count(*) FROM (SELECT unnest(CAST(json_extract(metadata, '$.{READ_FLAGS}') AS VARCHAR[])) "
        f"AS flag FROM read_parquet([{sources}], union_by_name=true) WHERE metadata LIKE '%\"{READ_FLAGS}\"%') "
        "GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {flag: n for flag, n in rows}


def finish(job: DocJob, engine: str, layout: Layout, stages: list[str], live: dict[str, StageCounts] | None,
           started: float, timings: dict[str, StageTiming] | None = None) -> JobResult:
    """Check the accounting and write job.json."""
    written = counts_from_outputs(layout, stages)
    check_balanced(written, stages)
    if live is not None:
        check_balanced(live, stages)
        for s in stages:
            if live[s].model_dump() != written[s].model_dump():
                raise AssertionError(
                    f"stage {s}: counted {live[s].model_dump()} while running but the outputs hold "
                    f"{written[s].model_dump()} — documents were lost or duplicated"
                )
    result = JobResult(job.name, engine, layout, stages, written, time.monotonic() - started, timings or {})
    payload = result.to_json() | {"config": job.config, "steps": [describe_step(s) for s in job.steps]}
    atomic_write_text(layout.state / JOB_JSON, json.dumps(payload, indent=2, default=str))
    return result
