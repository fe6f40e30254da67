"""``python -m pipelines report OUT``: an HTML page with PNG plots of a job's outputs.

Every number comes from DuckDB over the Parquet outputs (``OUT/documents``, every
``OUT/rejects/**``) and, where present, the shard manifest: documents and characters kept
and rejected per stage and reason, score histograms (DCLM, edu, AI-text, language, template
fraction), length distributions, the dedup cluster-size histogram and the per-source mixture.
Writes ``OUT/report/index.html`` with its PNGs beside it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from core.errors import InputError  # noqa: E402

SCORES = ["dclm_score", "edu_score", "ai_score", "language_score", "template_fraction"]
# rejects keep a capped text; their true size is in metadata when the cap applied
CHARS = "coalesce(TRY_CAST(json_extract(metadata, '$.original_chars') AS BIGINT), length(text))"
SOURCE = "coalesce(json_extract_string(metadata, '$.source'), 'default')"


def _rel(glob: str) -> str:
    return f"read_parquet('{glob}', union_by_name=true, hive_partitioning=false)"


def _has(path: Path, pattern: str) -> bool:
    return any(path.glob(pattern))


class Report:
    def __init__(self, out: Path):
        self.out = out
        self.dir = out / "report"
        self.con = duckdb.connect()
        self.docs = _rel(f"{out}/documents/*.parquet") if _has(out / "documents", "*.parquet") else None
        self.rejects = _rel(f"{out}/rejects/**/*.parquet") if _has(out / "rejects", "**/*.parquet") else None
        if self.docs is None and self.rejects is None:
            raise InputError(f"{out}: no documents/ or rejects/ Parquet outputs to report on")
        self.figures: list[tuple[str, str, str]] = []  # (file, title, caption)
        self.job = json.loads((out / "job.json").read_text()) if (out / "job.json").is_file() else {}

    def q(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def columns(self, rel: str | None) -> set[str]:
        if rel is None:
            return set()
        return {r[0] for r in self.q(f"DESCRIBE SELECT * FROM {rel}")}

    def save(self, fig, name: str, title: str, caption: str) -> None:
        fig.tight_layout()
        fig.savefig(self.dir / name, dpi=90)
        plt.close(fig)
        self.figures.append((name, title, caption))

    # -- plots --------------------------------------------------------------------------------
    def stages(self) -> None:
        kept = self.q(f"SELECT count(*), coalesce(sum(length(text)), 0) FROM {self.docs}")[0] if self.docs else (0, 0)
        rows = self.q(f"SELECT stage, reason, count(*), sum({CHARS}) FROM {self.rejects} GROUP BY 1, 2") \
            if self.rejects else []
        order = [s for s in self.job.get("stages", []) if s in {r[0] for r in rows}]
        order += sorted({r[0] for r in rows} - set(order))
        reasons = sorted({r[1] for r in rows})
        fig, axes = plt.subplots(1, 2, figsize=(13, max(3.5, 0.45 * (len(order) + 2))))
        for ax, idx, unit in ((axes[0], 2, "documents"), (axes[1], 3, "characters")):
            labels = ["kept (final)"] + order
            left = [0.0] * len(labels)
            ax.barh(0, kept[0 if idx == 2 else 1], color="#2e7d32", label="kept")
            cmap = plt.get_cmap("tab20")
            for k, reason in enumerate(reasons):
                vals = [0.0] + [float(next((r[idx] for r in rows if r[0] == s and r[1] == reason), 0) or 0)
                                for s in order]
                ax.barh(range(len(labels)), vals, left=left, color=cmap(k % 20), label=reason)
                left = [a + b for a, b in zip(left, vals, strict=True)]
            ax.set_yticks(range(len(labels)), labels)
            ax.invert_yaxis()
            ax.set_xlabel(unit)
            ax.set_title(f"{unit} kept and rejected per stage, by reason")
        axes[1].legend(fontsize=7, loc="lower right")
        self.save(fig, "stages.png", "Kept and rejected per stage and reason",
                  "Rejected documents per stage, stacked by reason; characters of rejects use their "
                  "original size where the text was capped.")

    def scores(self) -> None:
        cols_d, cols_r = self.columns(self.docs), self.columns(self.rejects)
        present = [c for c in SCORES if c in cols_d or c in cols_r]
        if not present:
            return
        fig, axes = plt.subplots(1, len(present), figsize=(4.2 * len(present), 3.4), squeeze=False)
        for ax, col in zip(axes[0], present, strict=True):
            for rel, cols, label, color in ((self.docs, cols_d, "kept", "#2e7d32"),
                                            (self.rejects, cols_r, "rejected", "#c62828")):
                if rel is None or col not in cols:
                    continue
                vals = [r[0] for r in self.q(f"SELECT {col} FROM {rel} WHERE {col} IS NOT NULL")]
                if vals:
                    ax.hist(vals, bins=30, alpha=0.6, label=f"{label} ({len(vals)})", color=color)
            ax.set_title(col)
            ax.legend(fontsize=7)
        self.save(fig, "scores.png", "Score histograms", "Per-document scores written by the stages, kept vs rejected.")

    def lengths(self) -> None:
        fig, ax = plt.subplots(figsize=(7, 3.4))
        for rel, label, color in ((self.docs, "kept", "#2e7d32"), (self.rejects, "rejected", "#c62828")):
            if rel is None:
                continue
            vals = [r[0] for r in self.q(f"SELECT log10(greatest({CHARS}, 1)) FROM {rel}")]
            if vals:
                ax.hist(vals, bins=40, alpha=0.6, label=f"{label} ({len(vals)})", color=color)
        ax.set_xlabel("log10(characters)")
        ax.legend()
        self.save(fig, "lengths.png", "Length distribution", "Document length in characters (log scale).")

    def clusters(self) -> None:
        rels = [r for r in (self.docs, self.rejects) if r is not None and "minhash_cluster_size" in self.columns(r)]
        if not rels:
            return
        union = " UNION ALL ".join(f"SELECT minhash_cluster, minhash_cluster_size FROM {r}" for r in rels)
        rows = self.q(f"SELECT minhash_cluster_size, count(DISTINCT minhash_cluster) FROM ({union}) "
                      "WHERE minhash_cluster_size IS NOT NULL GROUP BY 1 ORDER BY 1")
        fig, ax = plt.subplots(figsize=(7, 3.4))
        ax.bar([str(r[0]) for r in rows], [r[1] for r in rows], color="#1565c0")
        ax.set_yscale("log")
        ax.set_xlabel("cluster size (documents)")
        ax.set_ylabel("clusters")
        self.save(fig, "clusters.png", "Dedup cluster sizes", "MinHash clusters by size (1 = no near-duplicate).")

    def mixture(self) -> None:
        if self.docs is None:
            return
        rows = self.q(f"SELECT {SOURCE}, count(*), coalesce(sum(length(text)), 0) FROM {self.docs} GROUP BY 1 ORDER BY 1")
        if not rows:
            return
        manifest = self.out / "shards" / "manifest.json"
        tok = json.loads(manifest.read_text())["counts"] if manifest.is_file() else {}
        fig, axes = plt.subplots(1, 2 if tok else 1, figsize=(11 if tok else 6, 0.5 * len(rows) + 2.2), squeeze=False)
        ax = axes[0][0]
        total = sum(r[2] for r in rows) or 1
        ax.barh([f"{r[0]} ({r[1]} docs)" for r in rows], [r[2] / total for r in rows], color="#6a1b9a")
        ax.set_xlabel("share of kept characters")
        if tok:
            total_t = sum(c["tokens"] for c in tok.values()) or 1
            axes[0][1].barh(list(tok), [c["tokens"] / total_t for c in tok.values()], color="#ef6c00")
            axes[0][1].set_xlabel("share of shard tokens")
        self.save(fig, "mixture.png", "Per-source mixture", "Share of each source in the kept data.")

    # -- page ---------------------------------------------------------------------------------
    def write(self, sections: list[tuple[str, str]] | None = None) -> Path:
        """The page; ``sections`` are extra (title, HTML) blocks appended after the plots."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for plot in (self.stages, self.scores, self.lengths, self.clusters, self.mixture):
            plot()
        counts = self.job.get("counts", {})
        table = "".join(
            f"<tr><td>{html.escape(s)}</td><td>{c['docs_in']}</td><td>{c['kept']}</td><td>{c['rejected']}</td>"
            f"<td>{html.escape(', '.join(f'{k}={v}' for k, v in c['reasons'].items()))}</td></tr>"
            for s, c in counts.items())
        figs = "".join(
            f'<figure><h2>{html.escape(t)}</h2><img src="{f}" alt="{html.escape(t)}"><figcaption>{html.escape(c)}'
            f"</figcaption></figure>" for f, t, c in self.figures)
        figs += "".join(f"<section><h2>{html.escape(t)}</h2>{body}</section>" for t, body in sections or [])
        page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Report: {html.escape(str(self.out))}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}img{{max-width:100%;border:1px solid #ddd}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px}}</style></head>
<body><h1>{html.escape(self.job.get("name", "job"))} — {html.escape(str(self.out))}</h1>
<table><tr><th>stage</th><th>in</th><th>kept</th><th>rejected</th><th>reasons</th></tr>{table}</table>
{figs}
<script>
// lets a headless browser (and a test) confirm every plot actually decoded and rendered
window.addEventListener("load", () => {{
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0);
  document.body.dataset.images = imgs.length;
  document.body.dataset.imagesRendered = ok.length;
}});
</script></body></html>"""
        index = self.dir / "index.html"
        index.write_text(page, encoding="utf-8")
        return index


def write_report(out: str | Path) -> Path:
    out = Path(out)
    if not out.is_dir():
        raise InputError(f"no such output directory: {out}")
    return Report(out).write()
