"""The long-context mid-training job: documents -> one Arrow shard directory per stage.

GLM-5 extends context in three mid-training stages (32K / 128K / 200K tokens; 1T / 500B /
50B tokens) over a mixture of natural long documents, NExtLong-style interleaved samples,
EntropyLong-verified samples, MRCR-like conversations (for the longest stage) and regular
data. Each stage here has its sequence length, token budget and mixture; the demo config
scales them to 4K / 8K / 16K and a few hundred thousand tokens. Per stage:

    OUT/<stage>/manifest.json, shard-*.arrow   packed sequences (source = mixture component)
    OUT/<stage>/samples.jsonl                  where every sample sits + what it is made of
    OUT/<stage>/mrcr.jsonl                     its MRCR samples in OpenAI-MRCR fields (in the
                                               order of the mrcr records in samples.jsonl)
    OUT/<stage>/longctx.json                   counts per component, skips with reasons, notes
    OUT/summary.json                           all stages + EntropyLong kept-vs-rejected stats
"""

from __future__ import annotations

import json
import resource
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.cli import StepTimer
from core.errors import ConfigError, InputError
from core.io import atomic_write_text, write_jsonl_atomic
from core.tokenizer import TokenizerConfig, load_or_train
from pipelines.jobs.longctx_config import (
    KINDS,
    LMConfig,
    LongCtxConfig,
    LongCtxStageConfig,
)
from pipelines.pack_stage import Component, StageReport, pack_stage
from synth.catalog import DocumentCatalog, index_catalog
from synth.entropylong import EntropyLongSample, build_samples, summarize
from synth.lm import LMError
from synth.mixture_streams import entropylong_parts, interleaved_samples, mrcr_parts, natural_docs
from synth.mrcr import passage_pool
from synth.natural import select_natural
from synth.retrieval import ChunkIndex, make_index


@dataclass
class LongCtxSummary:
    stages: list[StageReport]
    entropylong: dict[str, Any]
    timings: dict[str, float]
    peak_rss_mb: float


def load_lm(cfg: LMConfig, log: Callable[[str], None]):
    from core.local_lm import obtain_smollm2
    from synth.lm import load_hf_lm

    path = Path(cfg.path) if cfg.path else obtain_smollm2(cfg.data_dir, log=log)
    if not path.exists():
        raise LMError(f"lm.path: {path} does not exist")
    return load_hf_lm(path, max_tokens=cfg.max_tokens, threads=cfg.threads)


def _components(
    cfg: LongCtxConfig, stage: LongCtxStageConfig, rng: np.random.Generator, catalog: DocumentCatalog, tok,
    index: ChunkIndex | None, el_samples: list[EntropyLongSample], passages: dict[str, list[str]] | None,
    notes: dict[str, str],
) -> Iterator[Component]:
    """The stage's mixture: one stream per component, each with its budget of sequences."""
    L, seqs = stage.seq_len, stage.token_budget / stage.seq_len
    order = catalog.shuffled_ids(rng)
    for kind in KINDS:
        target = round(getattr(stage.mixture, kind) * seqs)
        skips: Counter = Counter()
        if target == 0:
            yield Component(kind, 0, iter(()))
        elif kind == "natural":
            docs = ((i, catalog.by_id[i].n_tokens, catalog.by_id[i].meta) for i in order)
            ids, reasons = select_natural(docs, stage.natural)
            skips.update(reasons)
            yield Component(kind, target, natural_docs(catalog, ids, tok), streamed=True, skips=skips)
        elif kind == "regular":
            yield Component(kind, target, natural_docs(catalog, order, tok), streamed=True)
        elif kind == "interleaved":
            lo = int(stage.interleave_min_frac * L)
            ids = [i for i in order if lo <= catalog.by_id[i].n_tokens < L - 1]
            skips["outside_length_range"] = len(order) - len(ids)
            stream = interleaved_samples(catalog, ids, index, L - 1, tok, cfg.interleave, skips, notes)
            yield Component(kind, target, stream, skips=skips)
        elif kind == "entropylong":
            skips["no_verified_context"] = sum(1 for s in el_samples if not s.kept)
            yield Component(kind, target, entropylong_parts(el_samples, L - 1, tok), skips=skips)
        else:  # mrcr
            bins = [(max(1, int(a * L)), int(b * L)) for a, b in stage.mrcr_bins]
            stream = mrcr_parts(passages, bins, L - 1, tok, cfg.mrcr, rng, skips)
            yield Component(kind, target, stream, skips=skips)


def run_longctx(
    cfg: LongCtxConfig, only: list[str] | None = None, log: Callable[[str], None] = print
) -> LongCtxSummary:
    stages = [s for s in cfg.stages if not only or s.name in only]
    if only and len(stages) != len(set(only)):
        missing = sorted(set(only) - {s.name for s in cfg.stages})
        raise ConfigError(f"unknown stage(s) {missing}; the config has {[s.name for s in cfg.stages]}")
    if cfg.lm.path and not Path(cfg.lm.path).exists():  # checked before the documents are read
        raise ConfigError(f"lm.path: {cfg.lm.path} does not exist")
    step = StepTimer(log)

    with step("catalog"):
        if not Path(cfg.tokenizer).is_file():
            raise InputError(
                f"tokenizer: {cfg.tokenizer} does not exist (run `make demo`, or point it at a tokenizer.json)"
            )
        tok, info = load_or_train(TokenizerConfig(path=cfg.tokenizer), None, Path(cfg.output))
        catalog = DocumentCatalog(cfg.documents, tok, log=log)
    uses = {k: any(getattr(s.mixture, k) > 0 for s in stages) for k in KINDS}
    index = None
    if uses["interleaved"] or uses["entropylong"]:
        with step(f"retrieval index ({cfg.index.retrieval.method})"):
            index = index_catalog(
                catalog, make_index(cfg.index.retrieval), cfg.interleave.chunk, cfg.index.max_chunks, tok
            )
            log(f"   {len(index)} meta-chunks indexed")
    el_samples: list[EntropyLongSample] = []
    if uses["entropylong"] and cfg.entropylong.docs:
        with step("entropylong verification"):
            e = cfg.entropylong
            ids = catalog.choose(e.docs, [cfg.seed, 7], e.min_chars, e.sources)
            el_samples = build_samples(catalog.texts(ids), len(ids), index, load_lm(cfg.lm, log), e.verify, log)
    passages = None
    if uses["mrcr"]:
        with step("mrcr passages"):
            passages = passage_pool([cfg.documents], cfg.mrcr.passages)
    reports = []
    for si, stage in enumerate(cfg.stages):
        if stage.name not in {s.name for s in stages}:
            continue
        with step(f"stage {stage.name} (seq_len {stage.seq_len})"):
            out, notes = Path(cfg.output) / stage.name, {}
            rng = np.random.default_rng([cfg.seed, si])
            components = _components(cfg, stage, rng, catalog, tok, index, el_samples, passages, notes)
            writer_cfg = {"longctx": cfg.model_dump(mode="json"), "stage": stage.model_dump(mode="json")}
            report, mrcr_rows = pack_stage(
                out, stage.name, stage.seq_len, components, info, writer_cfg, stage.shard_tokens, notes, log
            )
            if mrcr_rows:  # the MRCR samples themselves, in OpenAI-MRCR fields
                write_jsonl_atomic(out / "mrcr.jsonl", mrcr_rows)
            atomic_write_text(out / "longctx.json", json.dumps(report.stats(), indent=2, default=str))
            reports.append(report)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = LongCtxSummary(reports, summarize(el_samples), step.seconds, peak)
    record = {
        "stages": {r.name: r.stats() for r in reports},
        "entropylong": summary.entropylong,
        "entropylong_samples": [s.metadata() for s in el_samples],
        "timings": step.seconds,
        "peak_rss_mb": round(peak, 1),
    }
    atomic_write_text(Path(cfg.output) / "summary.json", json.dumps(record, indent=2, default=str))
    return summary


def print_summary(s: LongCtxSummary) -> None:
    from rich.console import Console
    from rich.table import Table

    from core.shards import read_manifest

    console = Console()
    t = Table(title="long-context stages: sequences written / target per mixture component")
    for col in ("stage", "component", "sequences", "samples", "skipped (reason: count)"):
        t.add_column(col, justify="right" if col in ("sequences", "samples") else "left")
    for r in s.stages:
        for k in KINDS:
            if r.targets[k]:
                skipped = ", ".join(f"{a}: {b}" for a, b in r.skips.get(k, {}).items())
                t.add_row(
                    r.name, k, f"{r.sequences.get(k, 0)}/{r.targets[k]}", str(r.samples.get(k, 0)), skipped
                )
    console.print(t)
    t = Table(title="shards per stage")
    for col in ("stage", "seq_len", "sequences", "tokens", "padding", "dropped", "time"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for r in s.stages:
        m = read_manifest(r.dir)
        t.add_row(
            r.name,
            str(r.seq_len),
            str(m.totals.sequences),
            f"{m.totals.tokens:,}",
            f"{r.pad_tokens:,}",
            f"{r.dropped_tokens:,}",
            f"{r.seconds:.1f}s",
        )
    console.print(t)
    for r in s.stages:
        for k, note in r.notes.items():
            console.print(f"{r.name} note ({k}): {note}")
    e = s.entropylong
    if e.get("documents"):
        console.print(
            f"EntropyLong: {e['documents']} documents, {e['kept']} chunks kept / {e['rejected']} rejected; "
            f"mean entropy reduction kept {e['mean_reduction_kept']} vs rejected {e['mean_reduction_rejected']} nats; "
            f"all kept together {e['mean_reduction_assembled']} nats"
        )
    for r in s.stages:
        console.print(f"{r.name}: {r.dir}/ (manifest.json, shard-*.arrow, samples.jsonl, longctx.json)")
    console.print("time per step: " + ", ".join(f"{k} {v:.1f}s" for k, v in s.timings.items()))
    console.print(f"peak RSS: {s.peak_rss_mb:.0f} MB")
