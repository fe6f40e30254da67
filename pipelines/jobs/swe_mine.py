"""``python -m pipelines swe-mine``: issue–PR pairs for software-engineering data (GLM-5 recipe).

Inputs (any subset): GH-Archive-style event files, GitHub API dumps (or recorded cassettes),
local git repositories. Stages: parse -> link -> repo_filter (relaxed) -> issue_filter
(strict) -> patch_filter -> dedup (MinHash) -> decontaminate -> relevant_files. The rules and
both implementations (DuckDB on the local engine, DataFrames on Spark) are in ``swe_envs.mining``;
this job only composes them: it runs the miner on the engine it is given, checks the
accounting, packs shards and writes:

    OUT/documents/*.parquet   training documents (id, text, metadata JSON, repo, instance_id, …)
    OUT/rejects/*.parquet     every dropped record / link / pair with stage and reason
    OUT/instances.jsonl       candidate task instances in SWE-bench format, sorted by instance_id
    OUT/shards/               the documents tokenized and packed (manifest.json + Arrow files)
    OUT/job.json              per-stage counts (in = kept + rejected), stats, config

The local engine's worker processes start through forkserver: scripts that call ``run``
need the ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from pydantic import Field

from core.cache import cache_dir
from core.config import StrictModel
from core.engine import Engine
from core.errors import ConfigError
from core.io import atomic_write_text
from core.local_engine import LocalEngineConfig
from core.outputs import prepare_output
from core.shards import Manifest
from core.spark import SparkConfig
from core.storage import fetched_tree, is_url
from core.tokenizer import TokenizerConfig, load_or_train
from pipelines.chain import StageCounts
from pipelines.job import rejected_by_stage, stage_counts
from pipelines.pack import PackConfig, iter_documents, pack_documents
from swe_envs.git import restore_git_dirs
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.mine import Mining
from swe_envs.mining.stages import STAGES, UNITS, MineUnit, load_benchmarks
from swe_envs.mining.units import list_units

# what a swe-mine run writes (and a re-run deletes: mining does not resume)
OUTPUTS = ("documents", "rejects", "work", "shards", "instances.jsonl", "job.json", ".instances-spark")


class SweLocalConfig(LocalEngineConfig):
    # pairs per task of the per-pair stages (one repository's pairs stay together)
    chunk_pairs: int = Field(default=32, gt=0)


class SweMineConfig(StrictModel):
    mining: MiningConfig = MiningConfig()
    local: SweLocalConfig = SweLocalConfig()
    spark: SparkConfig = SparkConfig()
    tokenizer: TokenizerConfig = TokenizerConfig()
    pack: PackConfig = PackConfig(seq_len=2048, stage="swe")
    pack_shards: bool = True


@dataclass
class MineResult:
    out_dir: Path
    engine: str
    counts: dict[str, StageCounts]
    stats: dict[str, Any]
    seconds: float
    documents: int
    instances: int
    manifest: Manifest | None = None
    timings: dict[str, float] = field(default_factory=dict)


class MineInputs(StrictModel):
    events: list[str] = []  # GH-Archive-style event files or directories
    api: list[str] = []  # GitHub API dumps or recorded cassettes
    repos: list[str] = []  # git repositories or directories of them


def count_stages(out: Path, stats: dict[str, Any]) -> tuple[dict[str, StageCounts], int, int]:
    """Per-stage counts from what was written (rejects by stage/reason) plus the miner's counts
    of the units that change on the way (records, then links, then pairs); fails when documents
    were lost or duplicated."""
    con = duckdb.connect()
    rejected = rejected_by_stage(con, out / "rejects", list(STAGES))
    entering = {"parse": stats["parse_records_kept"] + sum(rejected["parse"].values()),
                "link": stats["pairs"] + sum(rejected["link"].values())}  # every link: a pair or a reject
    counts = stage_counts(list(STAGES), rejected, entering)
    n_docs = con.execute(f"SELECT count(*) FROM read_parquet('{out}/documents/*.parquet')").fetchone()[0]
    with open(out / "instances.jsonl", encoding="utf-8") as fh:
        n_inst = sum(1 for _ in fh)
    if not counts[STAGES[-1]].kept == n_docs == n_inst:
        raise AssertionError(
            f"{counts[STAGES[-1]].kept} pairs passed every stage but {n_docs} documents and "
            f"{n_inst} instances were written — pairs were lost or duplicated"
        )
    return counts, n_docs, n_inst


def _pack(out: Path, cfg: SweMineConfig) -> Manifest | None:
    texts = (r[1] for rows in iter_documents(out / "documents", 64) for r in rows)
    tok, info = load_or_train(
        cfg.tokenizer, None if cfg.tokenizer.path else texts, out / "shards" / "tokenizer"
    )
    job_config = {"tokenizer": cfg.tokenizer.model_dump(), "pack": cfg.pack.model_dump(), "job": "swe-mine"}
    return pack_documents(
        out / "documents", tok, info, out / "shards", cfg.pack, job_config=job_config, progress=False
    )


def run(
    cfg: SweMineConfig,
    inputs: MineInputs,
    out: str | Path,
    engine: Engine,
    overwrite: bool = False,
    progress: bool = True,
    staging: Path | None = None,
) -> MineResult:
    """Mine ``inputs`` (paths or object-storage URLs) into ``out``; ``staging``: where repositories
    given as URLs are fetched to (default: the cache's ``staging/``)."""
    started = time.monotonic()
    # resolved on the driver: Spark executors do not share its working directory; URLs stay URLs
    events, api, repos = (
        [p if is_url(p) else str(Path(p).absolute()) for p in group]
        for group in (inputs.events, inputs.api, inputs.repos)
    )
    with ExitStack() as fetched:

        def fetch(url: str) -> Path:
            # git reads a repository's files by path, so a repository in object storage is fetched
            # whole (the only input that is not streamed) and removed after the run; on Spark the
            # executors read it there: on a cluster, staging must be a path they all share
            local = fetched.enter_context(fetched_tree(url, staging or cache_dir() / "staging"))
            restore_git_dirs(local)
            return local

        units = list_units(events, api, repos, fetch)
        return _mine(cfg, units, Path(out).absolute(), engine, overwrite, progress, started)


def _mine(
    cfg: SweMineConfig,
    units: list[MineUnit],
    out: Path,
    engine: Engine,
    overwrite: bool,
    progress: bool,
    started: float,
) -> MineResult:
    index = load_benchmarks(cfg.mining)
    if cfg.pack_shards and cfg.tokenizer.path and not Path(cfg.tokenizer.path).is_file():
        raise ConfigError(f"tokenizer.path: file not found: {cfg.tokenizer.path}")
    fingerprint = {
        "job": "swe-mine",
        "config": cfg.mining.model_dump(),
        "inputs": [u.path for u in units],
        "engine": engine.name,
    }
    # mining does not resume: every run replaces what a run writes
    prepare_output(out, fingerprint, overwrite, fresh=OUTPUTS)
    stats = engine.run(Mining(units, out, cfg.mining, index, cfg.local.chunk_pairs, progress))
    mined = time.monotonic() - started
    counts, n_docs, n_inst = count_stages(out, stats)
    manifest = _pack(out, cfg) if cfg.pack_shards and n_docs else None
    result = MineResult(out, engine.name, counts, stats, time.monotonic() - started, n_docs, n_inst, manifest)
    result.timings = {"mine_s": round(mined, 3), "pack_s": round(result.seconds - mined, 3)}
    payload = {
        "name": "swe-mine",
        "engine": engine.name,
        "stages": list(STAGES),
        "units": UNITS,
        "counts": {s: c.model_dump() for s, c in counts.items()},
        "stats": stats,
        "outputs": {
            "documents": n_docs,
            "instances": n_inst,
            "shards": manifest.totals.model_dump() if manifest else None,
        },
        "seconds": round(result.seconds, 3),
        "timings": result.timings | {"engine": stats.get("timings", {})},
        "inputs": {"units": len(units), "benchmark_instances": len(index) if index else 0},
        "config": cfg.model_dump(),
    }
    atomic_write_text(out / "job.json", json.dumps(payload, indent=2, default=str))
    return result


def print_summary(result: MineResult, echo=print, where: str | None = None) -> None:
    """The per-filter count summary (printed at the end of every run); ``where``: the output as the
    user named it (a URL the staged output went to), default the directory the job wrote."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"swe-mine ({result.engine}): every filter's effect")
    for col in ("stage", "unit", "in", "kept", "rejected", "reasons"):
        t.add_column(col, justify="right" if col in ("in", "kept", "rejected") else "left")
    for stage, c in result.counts.items():
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(c.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        t.add_row(stage, UNITS[stage], str(c.docs_in), str(c.kept), str(c.rejected), reasons)
    Console(width=160).print(t)
    obs = ", ".join(f"{k}={v}" for k, v in result.stats.get("observations", {}).items())
    ents = ", ".join(f"{k}={v}" for k, v in result.stats.get("entities", {}).items())
    echo(f"observations: {obs}")
    echo(f"entities after merging: {ents}")
    out = (where or str(result.out_dir)).rstrip("/")
    echo(f"documents: {result.documents} -> {out}/documents")
    echo(f"SWE-bench instances: {result.instances} -> {out}/instances.jsonl")
    if result.manifest is not None:
        m = result.manifest
        echo(f"shards: {len(m.shards)} files, {m.totals.sequences} x {m.seq_len} tokens -> {out}/shards")
    else:
        echo("shards: none (no documents kept, or pack_shards is off)")
    echo(f"rejects: {out}/rejects; counts: {out}/job.json; {result.seconds:.1f}s")
