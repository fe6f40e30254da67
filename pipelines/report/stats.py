"""``python -m pipelines stats PATH``: counts for any output, computed with DuckDB.

PATH may be a job output directory (``documents/``, ``rejects/``, ``shards/``, ``job.json``),
a documents or rejects dataset (a directory of Parquet files or one file), or a shard
directory. Shard tables are memory-mapped with pyarrow and queried by DuckDB in place; their
token counts are checked against the manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from core.errors import InputError
from core.records import ID, METADATA, REASON, STAGE, TEXT
from core.shards import MANIFEST, open_shard, read_manifest

_BASE = {ID, TEXT, METADATA, STAGE, REASON}


def _parquet_glob(path: Path) -> str | None:
    if path.is_file() and path.suffix == ".parquet":
        return str(path)
    if path.is_dir() and any(path.glob("*.parquet")):
        return str(path / "*.parquet")
    return None


def dataset_stats(con: duckdb.DuckDBPyConnection, glob: str) -> dict[str, Any]:
    rel = f"read_parquet('{glob}')"
    columns = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()]
    src = "coalesce(json_extract_string(metadata, '$.source'), 'default')"
    n, chars = con.execute(f"SELECT count(*), coalesce(sum(length(text)), 0) FROM {rel}").fetchone()
    out: dict[str, Any] = {"path": glob, "documents": n, "chars": int(chars)}
    out["sources"] = {
        s: {"documents": d, "chars": int(c)}
        for s, d, c in con.execute(
            f"SELECT {src}, count(*), sum(length(text)) FROM {rel} GROUP BY 1 ORDER BY 1"
        ).fetchall()
    }
    if STAGE in columns:
        by_stage: dict[str, dict[str, int]] = {}
        query = f"SELECT stage, reason, count(*) FROM {rel} GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2"
        for stage, reason, k in con.execute(query).fetchall():
            by_stage.setdefault(stage, {})[reason] = k
        out["rejects_by_stage"] = by_stage
    numeric = {}
    for col, typ in con.execute(
        f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {rel})"
    ).fetchall():
        if col not in _BASE and typ in ("DOUBLE", "BIGINT", "INTEGER", "FLOAT"):
            lo, mean, hi = con.execute(
                f'SELECT min("{col}"), avg("{col}"), max("{col}") FROM {rel}'
            ).fetchone()
            numeric[col] = {"min": lo, "mean": mean, "max": hi}
    if numeric:
        out["columns"] = numeric
    return out


def shard_stats(con: duckdb.DuckDBPyConnection, shard_dir: Path) -> dict[str, Any]:
    manifest = read_manifest(shard_dir)
    rows: dict[str, list[int]] = {}
    for info in manifest.shards:
        table = open_shard(shard_dir / info.file)  # memory-mapped; DuckDB scans it in place
        con.register("shard", table)
        for source, seqs, toks in con.execute(
            "SELECT source, count(*), sum(len(tokens)) FROM shard GROUP BY 1"
        ).fetchall():
            acc = rows.setdefault(source, [0, 0])
            acc[0] += seqs
            acc[1] += int(toks)
        con.unregister("shard")
    sources = {
        s: {
            "sequences": seqs,
            "tokens": toks,
            "documents": manifest.counts[s].docs if s in manifest.counts else None,
        }
        for s, (seqs, toks) in sorted(rows.items())
    }
    total_tokens = sum(v["tokens"] for v in sources.values())
    return {
        "path": str(shard_dir),
        "stage": manifest.stage,
        "seq_len": manifest.seq_len,
        "tokenizer": manifest.tokenizer.id,
        "vocab_size": manifest.tokenizer.vocab_size,
        "shards": len(manifest.shards),
        "sequences": sum(v["sequences"] for v in sources.values()),
        "tokens": total_tokens,
        "sources": sources,
        "mixture": {
            s: round(v["tokens"] / total_tokens, 4) if total_tokens else 0.0 for s, v in sources.items()
        },
        "matches_manifest": total_tokens == manifest.totals.tokens,
    }


def collect_stats(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise InputError(f"no such path: {p}")
    con = duckdb.connect()
    out: dict[str, Any] = {}
    if (p / "job.json").is_file():
        job = json.loads((p / "job.json").read_text())
        out["job"] = {"name": job.get("name"), "engine": job.get("engine"), "counts": job.get("counts")}
    if (p / MANIFEST).is_file():
        out["shards"] = shard_stats(con, p)
    glob = _parquet_glob(p)
    if glob:
        out["dataset"] = dataset_stats(con, glob)
    for name in ("documents", "rejects"):
        g = _parquet_glob(p / name)
        if g:
            out[name] = dataset_stats(con, g)
    if p.is_dir():
        for sub in sorted(p.iterdir()):
            if sub.is_dir() and (sub / MANIFEST).is_file():
                out.setdefault("shard_sets", {})[sub.name] = shard_stats(con, sub)
    if not out:
        raise InputError(f"{p}: no documents, rejects, shards or job.json found")
    return out


def stage_table(title: str, counts: dict[str, dict[str, Any]], top: int | None = None):
    """A rich table of documents per stage: in, kept, rejected and the reasons (the ``top`` most
    frequent, or all)."""
    from rich.table import Table

    t = Table(title=title)
    for col in ("stage", "in", "kept", "rejected", "top reasons" if top else "reasons"):
        t.add_column(col, justify="right" if col in ("in", "kept", "rejected") else "left")
    for stage, c in counts.items():
        reasons = sorted(c["reasons"].items(), key=lambda kv: -kv[1])[:top] if top else c["reasons"].items()
        t.add_row(stage, str(c["docs_in"]), str(c["kept"]), str(c["rejected"]),
                  ", ".join(f"{k}={v}" for k, v in reasons))
    return t


def render(stats: dict[str, Any], echo=print) -> None:
    """A compact human-readable view of ``collect_stats`` output."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if "job" in stats and stats["job"].get("counts"):
        job = stats["job"]
        console.print(stage_table(f"job {job['name']} ({job['engine']}): documents per stage", job["counts"]))
    for name in ("dataset", "documents", "rejects"):
        if name in stats:
            d = stats[name]
            t = Table(title=f"{name}: {d['documents']} documents, {d['chars']:,} chars ({d['path']})")
            t.add_column("source")
            t.add_column("documents", justify="right")
            t.add_column("chars", justify="right")
            for s, v in d["sources"].items():
                t.add_row(s, str(v["documents"]), f"{v['chars']:,}")
            console.print(t)
            for stage, reasons in d.get("rejects_by_stage", {}).items():
                echo(f"  rejected by {stage}: " + ", ".join(f"{r}={n}" for r, n in reasons.items()))
    shard_sets = dict(stats.get("shard_sets", {}))
    if "shards" in stats:
        shard_sets["."] = stats["shards"]
    for name, s in shard_sets.items():
        t = Table(
            title=f"shards {name}: {s['shards']} files, {s['sequences']} × {s['seq_len']} tokens "
            f"= {s['tokens']:,} tokens, tokenizer {s['tokenizer']} (manifest ok: {s['matches_manifest']})"
        )
        for col in ("source", "documents", "sequences", "tokens", "share"):
            t.add_column(col, justify="left" if col == "source" else "right")
        for src, v in s["sources"].items():
            t.add_row(
                src, str(v["documents"]), str(v["sequences"]), f"{v['tokens']:,}", f"{s['mixture'][src]:.1%}"
            )
        console.print(t)
