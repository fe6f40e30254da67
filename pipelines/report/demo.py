"""The demo's one HTML page: the web job's plots (``pipelines.report.html``), its corpus passes
(dedup, DCLM classifier and threshold, LLM edu scoring and its distillation), then a section per
later stage — issue–PR mining, long-context data, the mixture shards, training loss and the
time of each stage. Every number is read back from the outputs the stages wrote."""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib.pyplot as plt

from core.io import read_jsonl
from pipelines.report.html import Report


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _reasons(c: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(c["reasons"].items(), key=lambda kv: -kv[1]))


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _web(out: Path) -> str:
    """What the web job decided over the whole corpus (job.json's ``corpus``), one row per pass;
    a pass the run skipped shows the job's own reason."""
    job = json.loads((out / "job.json").read_text())
    corpus, cfg = job.get("corpus", {}), job.get("config", {})
    counts = job.get("counts", {})
    rows = []
    mh = corpus.get("minhash")
    if isinstance(mh, dict):
        rows.append(["MinHash dedup", f"{mh.get('clusters', 0)} clusters, {mh.get('duplicates', 0)} duplicates "
                     f"removed ({mh.get('lsh', '')})"])
    if "template_lines" in corpus:
        rows.append(["template lines", f"{corpus['template_lines']} template lines found (repeated across pages)"])
    tr = corpus.get("dclm_training")
    if isinstance(tr, dict):
        rows.append(["DCLM classifier (fastText)", ", ".join(f"{k} {_fmt(v)}" for k, v in tr.items())])
    elif tr is not None:
        rows.append(["DCLM classifier (fastText)", str(tr)])
    if "dclm_threshold" in corpus:
        top = cfg.get("dclm", {}).get("keep_top_fraction")
        rows.append(["DCLM keep top", f"{_fmt(top)} of the corpus: score ≥ {_fmt(corpus['dclm_threshold'])} "
                     f"({corpus.get('dclm_threshold_method', '')})"])
    if "llm_sample_docs" in corpus:
        edu = cfg.get("edu", {})
        llm = (edu.get("score") or {}).get("llm") or {}
        served = "served locally by core.llm_server" if edu.get("serve_local_model") else llm.get("base_url", "")
        scored = counts.get("edu_score", {})
        rows.append(["LLM edu scoring", f"{corpus['llm_sample_docs']} documents scored by {llm.get('model', '?')} "
                     f"({served}), {corpus.get('llm_unscored_docs', 0)} failed; "
                     f"aggregation {(edu.get('score') or {}).get('aggregation', '?')}; "
                     f"stage in/kept {scored.get('docs_in', '?')}/{scored.get('kept', '?')}"])
    dist = corpus.get("edu_distillation")
    if isinstance(dist, dict):
        rows.append(["edu distillation (fastText)", ", ".join(f"{k} {_fmt(v)}" for k, v in dist.items())])
    elif dist is not None:
        rows.append(["edu distillation (fastText)", str(dist)])
    thr = counts.get("edu_threshold")
    if thr:
        rows.append(["edu threshold", f"{(cfg.get('edu', {}).get('score') or {}).get('threshold', '?')}: "
                     f"kept {thr['kept']} of {thr['docs_in']}"])
    return (f"<p>engine {html.escape(str(job.get('engine', '')))}; kept {html.escape(str(job.get('kept', '')))} "
            "documents (<code>documents/</code>), rejects with stage and reason in <code>rejects/</code></p>"
            + _table(["corpus pass", "result"], rows))


def _swe(out: Path) -> str:
    job = json.loads((out / "swe" / "job.json").read_text())
    rows = [[s, job["units"].get(s, ""), c["docs_in"], c["kept"], c["rejected"], _reasons(c)]
            for s, c in job["counts"].items()]
    o = job["outputs"]
    return (f"<p>engine {html.escape(job['engine'])}: {o['documents']} training documents, "
            f"{o['instances']} SWE-bench instances (<code>swe/instances.jsonl</code>)</p>"
            + _table(["stage", "unit", "in", "kept", "rejected", "reasons"], rows))


def _longctx(out: Path) -> str:
    summary = json.loads((out / "longctx" / "summary.json").read_text())
    rows = []
    for name, st in summary["stages"].items():
        for kind, target in st["targets"].items():
            if target or st["sequences"].get(kind):
                skips = ", ".join(f"{k}={v}" for k, v in st["skips"].get(kind, {}).items())
                rows.append([name, st["seq_len"], kind, target, st["sequences"].get(kind, 0),
                             st["samples"].get(kind, 0), skips])
    el = summary.get("entropylong") or {}
    note = f"<p>EntropyLong verification: {html.escape(json.dumps(el))}</p>" if el else ""
    return _table(["stage", "seq_len", "component", "target sequences", "sequences", "samples", "skipped"],
                  rows) + note


def _mixture(out: Path) -> str:
    m = json.loads((out / "shards" / "manifest.json").read_text())
    total = sum(c["tokens"] for c in m["counts"].values()) or 1
    rows = [[src, c["docs"], c["sequences"], f"{c['tokens']:,}", f"{c['tokens'] / total:.1%}"]
            for src, c in m["counts"].items()]
    return (f"<p>seq_len {m['seq_len']}, tokenizer vocab {m['tokenizer']['vocab_size']}, "
            f"{len(m['shards'])} shard(s) in <code>shards/</code></p>"
            + _table(["component (source)", "documents", "sequences", "tokens", "share"], rows))


def _loss(report: Report, out: Path) -> str:
    metrics = read_jsonl(out / "train" / "metrics.jsonl", "training metrics")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for stage in dict.fromkeys(m.get("stage", "main") for m in metrics):
        pts = [(m["step"], m["loss"]) for m in metrics if m.get("stage", "main") == stage]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=stage)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (LM + MTP)")
    ax.legend()
    report.dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(report.dir / "loss.png", dpi=90)
    plt.close(fig)
    rows = [[m["step"], m.get("stage", ""), m.get("seq_len", ""), f"{m['loss']:.4f}", f"{m.get('lm_loss', 0):.4f}"]
            for m in metrics]
    return ('<img src="loss.png" alt="training loss"><p>The GLM-5-shaped tiny model (training.trainer), '
            "per step and stage.</p>" + _table(["step", "stage", "seq_len", "loss", "lm loss"], rows))


def write_demo_report(out: str | Path, timings: dict[str, float]) -> Path:
    out = Path(out)
    report = Report(out)
    sections = [
        ("Web quality: corpus passes (dedup, DCLM, LLM edu scoring)", _web(out)),
        ("Issue–PR mining (swe-mine)", _swe(out)),
        ("Long-context stage data", _longctx(out)),
        ("Mixture shards (pretraining)", _mixture(out)),
        ("Training: loss per step", _loss(report, out)),
        ("Time per stage", _table(["stage", "seconds"], [[k, f"{v:.1f}"] for k, v in timings.items()])),
    ]
    return report.write(sections)
