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

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from datatrove.pipeline.base import PipelineStep

from core.errors import UserError
from core.io import atomic_write_text
from core.records import READ_FLAGS
from pipelines.chain import StageCounts, StepChain, check_balanced, describe_step
from pipelines.inputs import InputFile, InputSpec, ReadLimits

DOCUMENTS, REJECTS, JOB_JSON, FINGERPRINT = "documents", "rejects", "job.json", "fingerprint.json"


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
        }


def _is_dataset_dir(path: Path) -> bool:
    """Only Parquet parts and engine bookkeeping: safe to delete on overwrite."""
    return all(p.is_file() and (p.suffix == ".parquet" or p.name.startswith((".", "_"))) for p in path.iterdir())


def prepare_output(layout: Layout, fingerprint: dict[str, Any], overwrite: bool) -> None:
    """Make the layout ready. Re-running the same job resumes it (finished tasks are kept);
    running a different job into it is refused unless ``overwrite``, which starts clean."""
    fp_path = layout.state / FINGERPRINT
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
    if overwrite:
        # only ever delete what a job wrote: an empty directory or one holding our fingerprint
        if layout.state.exists():
            if any(layout.state.iterdir()) and not fp_path.is_file():
                raise UserError(f"{layout.state} is not empty and is not a job output; refusing to overwrite it")
            shutil.rmtree(layout.state)
        for d in (layout.documents, layout.rejects):
            if d.exists():
                if not _is_dataset_dir(d):
                    raise UserError(f"{d} holds more than a dataset; refusing to overwrite it")
                shutil.rmtree(d)
    if fp_path.is_file():
        old = json.loads(fp_path.read_text())
        if old.get("digest") != digest:
            raise UserError(
                f"{layout.state} holds the output of a different job or config; "
                "pass --overwrite to replace it or choose another output directory"
            )
    layout.state.mkdir(parents=True, exist_ok=True)
    atomic_write_text(fp_path, json.dumps({"digest": digest, "job": fingerprint}, indent=2, default=str))


def counts_from_outputs(layout: Layout, stages: list[str]) -> dict[str, StageCounts]:
    """Per-stage counts derived only from what was written (DuckDB over the Parquet files).

    Each document passes the stages in order, so stage i saw everything the reader produced
    minus what stages before i rejected."""
    con = duckdb.connect()
    kept = con.execute(f"SELECT count(*) FROM read_parquet('{layout.documents}/*.parquet')").fetchone()[0]
    rows = con.execute(
        f"SELECT stage, reason, count(*) FROM read_parquet('{layout.rejects}/*.parquet') GROUP BY 1, 2"
    ).fetchall()
    rejected: dict[str, dict[str, int]] = {s: {} for s in stages}
    for stage, reason, n in rows:
        if stage not in rejected:
            raise AssertionError(f"rejects name an unknown stage {stage!r} (job stages: {stages})")
        rejected[stage][reason] = n
    total = kept + sum(sum(r.values()) for r in rejected.values())
    counts, remaining = {}, total
    for s in stages:
        n_rej = sum(rejected[s].values())
        counts[s] = StageCounts(
            docs_in=remaining,
            kept=remaining - n_rej,
            rejected=n_rej,
            reasons=dict(sorted(rejected[s].items())),
        )
        remaining -= n_rej
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
           started: float) -> JobResult:
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
    result = JobResult(job.name, engine, layout, stages, written, time.monotonic() - started)
    payload = result.to_json() | {"config": job.config, "steps": [describe_step(s) for s in job.steps]}
    atomic_write_text(layout.state / JOB_JSON, json.dumps(payload, indent=2, default=str))
    return result
