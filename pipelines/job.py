"""A document job is data: inputs, a list of per-document steps, read limits.

Both engines take the same ``DocJob`` and write the same output layout:

    OUT/documents/*.parquet   kept documents  (id, text, metadata JSON, promoted columns)
    OUT/rejects/*.parquet     rejected ones   (same columns + stage, reason)
    OUT/job.json              engine, stages, per-stage counts, timings

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
from core.shards import atomic_write_text
from pipelines.chain import StageCounts, StepChain, check_balanced, describe_step
from pipelines.readers import InputFile, InputSpec, ReadLimits

DOCUMENTS, REJECTS, JOB_JSON, FINGERPRINT = "documents", "rejects", "job.json", "fingerprint.json"


@dataclass
class DocJob:
    name: str
    inputs: list[InputSpec]
    steps: list[PipelineStep]
    limits: ReadLimits = field(default_factory=ReadLimits)
    # the producing config, recorded in job.json and in shard manifests
    config: dict[str, Any] = field(default_factory=dict)

    def chain(self) -> StepChain:
        return StepChain(self.steps, reject_text_chars=self.limits.reject_text_chars)

    def fingerprint(self, files: list[InputFile]) -> dict[str, Any]:
        return {
            "job": self.name,
            "config": self.config,
            "steps": [describe_step(s) for s in self.steps],
            "limits": self.limits.model_dump(),
            "files": [f.path for f in files],
        }


@dataclass
class JobResult:
    name: str
    engine: str
    out_dir: Path
    stages: list[str]
    counts: dict[str, StageCounts]
    seconds: float

    @property
    def kept(self) -> int:
        return self.counts[self.stages[-1]].kept

    @property
    def documents_dir(self) -> Path:
        return self.out_dir / DOCUMENTS

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "engine": self.engine,
            "stages": self.stages,
            "counts": {s: self.counts[s].model_dump() for s in self.stages},
            "seconds": round(self.seconds, 3),
        }


def prepare_output(out_dir: Path, fingerprint: dict[str, Any], overwrite: bool) -> None:
    """Make ``out_dir`` ready. Re-running the same job resumes it (finished tasks are kept);
    running a different job into it is refused unless ``overwrite``, which starts clean."""
    fp_path = out_dir / FINGERPRINT
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
    if overwrite and out_dir.exists():
        # only ever delete what a job wrote: an empty directory or one holding our fingerprint
        if any(out_dir.iterdir()) and not fp_path.is_file():
            raise UserError(f"{out_dir} is not empty and is not a job output; refusing to overwrite it")
        shutil.rmtree(out_dir)
    if fp_path.is_file():
        old = json.loads(fp_path.read_text())
        if old.get("digest") != digest:
            raise UserError(
                f"{out_dir} holds the output of a different job or config; "
                "pass --overwrite to replace it or choose another output directory"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(fp_path, json.dumps({"digest": digest, "job": fingerprint}, indent=2, default=str))


def counts_from_outputs(out_dir: Path, stages: list[str]) -> dict[str, StageCounts]:
    """Per-stage counts derived only from what was written (DuckDB over the Parquet files).

    Each document passes the stages in order, so stage i saw everything the reader produced
    minus what stages before i rejected."""
    con = duckdb.connect()
    kept = con.execute(f"SELECT count(*) FROM read_parquet('{out_dir / DOCUMENTS}/*.parquet')").fetchone()[0]
    rows = con.execute(
        f"SELECT stage, reason, count(*) FROM read_parquet('{out_dir / REJECTS}/*.parquet') GROUP BY 1, 2"
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
    return counts


def finish(
    job: DocJob,
    engine: str,
    out_dir: Path,
    stages: list[str],
    live: dict[str, StageCounts] | None,
    started: float,
) -> JobResult:
    """Check the accounting and write job.json."""
    written = counts_from_outputs(out_dir, stages)
    check_balanced(written, stages)
    if live is not None:
        check_balanced(live, stages)
        for s in stages:
            if live[s].model_dump() != written[s].model_dump():
                raise AssertionError(
                    f"stage {s}: counted {live[s].model_dump()} while running but the outputs hold "
                    f"{written[s].model_dump()} — documents were lost or duplicated"
                )
    result = JobResult(job.name, engine, out_dir, stages, written, time.monotonic() - started)
    payload = result.to_json() | {"config": job.config, "steps": [describe_step(s) for s in job.steps]}
    atomic_write_text(out_dir / JOB_JSON, json.dumps(payload, indent=2, default=str))
    return result
