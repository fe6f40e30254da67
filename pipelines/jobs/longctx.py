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
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.cli import StepTimer
from core.errors import ConfigError, InputError
from core.io import atomic_write_text, write_jsonl_atomic
from core.shards import ShardWriter
from core.tokenizer import TokenizerConfig, load_or_train
from pipelines.jobs.longctx_config import (
    KINDS,
    LMConfig,
    LongCtxConfig,
    StageConfig,
)
from pipelines.jobs.longctx_sources import (
    Corpus,
    build_index,
    entropylong_parts,
    interleaved_samples,
    mrcr_parts,
    natural_docs,
)
from pipelines.pack import StageWriter, StreamPacker
from synth.entropylong import EntropyLongSample, build_sample, summarize
from synth.lm import LMError
from synth.mrcr import passage_pool
from synth.natural import select_natural
from synth.retrieval import make_index


@dataclass
class StageReport:
    name: str
    seq_len: int
    dir: Path
    targets: dict[str, int]
    sequences: dict[str, int] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    skips: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    pad_tokens: int = 0
    dropped_tokens: int = 0
    seconds: float = 0.0


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


def run_entropylong(cfg: LongCtxConfig, corpus: Corpus, index, log) -> list[EntropyLongSample]:
    ecfg = cfg.entropylong
    pool = [
        d.id
        for d in corpus.docs
        if d.n_chars >= ecfg.min_chars and (ecfg.sources is None or d.source in ecfg.sources)
    ]
    order = np.random.default_rng([cfg.seed, 7]).permutation(len(pool))
    chosen = [pool[i] for i in order[: ecfg.docs]]
    lm = load_lm(cfg.lm, log)
    samples = []
    for n, (doc_id, text) in enumerate(corpus.texts(chosen), 1):
        s = build_sample(doc_id, text, index, lm, ecfg.verify)
        samples.append(s)
        red = [f"{v.reduction:+.2f}{'*' if v.kept else ''}" for v in s.verdicts]
        log(
            f"   entropylong {n}/{len(chosen)} {doc_id}: H={s.base_entropy:.2f} at {len(s.positions)} "
            f"positions; reductions {' '.join(red)} (* kept)"
        )
    return samples


def _pack_stage(
    cfg: LongCtxConfig,
    si: int,
    stage: StageConfig,
    corpus: Corpus,
    tok,
    info,
    index,
    el_samples: list[EntropyLongSample],
    passages: dict[str, list[str]] | None,
    log,
) -> StageReport:
    out = Path(cfg.output) / stage.name
    L = stage.seq_len
    seqs = stage.token_budget / L
    report = StageReport(stage.name, L, out, {k: round(getattr(stage.mixture, k) * seqs) for k in KINDS})
    rng = np.random.default_rng([cfg.seed, si])
    order = [corpus.docs[i].id for i in rng.permutation(len(corpus.docs))]
    t0 = time.monotonic()
    writer_cfg = {"longctx": cfg.model_dump(mode="json"), "stage": stage.model_dump(mode="json")}
    per_shard = max(1, stage.shard_tokens // L)
    out.mkdir(parents=True, exist_ok=True)
    mrcr_rows: list[dict] = []
    with (
        ShardWriter(
            out, seq_len=L, tokenizer=info, stage=stage.name, sequences_per_shard=per_shard, config=writer_cfg
        ) as writer,
        open(out / "samples.jsonl", "w", encoding="utf-8") as log_fh,
    ):
        sw = StageWriter(writer, log_fh)
        for kind in KINDS:
            target = report.targets[kind]
            if target == 0:
                continue
            packer = StreamPacker(sw, kind, L, info.eos_id)
            skips: Counter = Counter()
            n_samples = 0
            if kind in ("natural", "regular"):
                if kind == "natural":
                    ids, reasons = select_natural(
                        ((i, corpus.by_id[i].n_tokens, corpus.by_id[i].meta) for i in order), stage.natural
                    )
                    skips.update(reasons)
                else:
                    ids = order
                for pieces, meta in natural_docs(corpus, ids, tok):
                    n_samples += 1
                    writer.add_docs(kind)
                    if not packer.add_stream(pieces, kind, meta, target):
                        break
            else:
                if kind == "interleaved":
                    lo = int(stage.interleave_min_frac * L)
                    ids = [i for i in order if lo <= corpus.by_id[i].n_tokens < L - 1]
                    skips["outside_length_range"] = len(order) - len(ids)
                    stream: Iterator = interleaved_samples(
                        corpus, ids, index, L - 1, tok, cfg.interleave, skips, report.notes
                    )
                elif kind == "entropylong":
                    skips["no_verified_context"] = sum(1 for s in el_samples if not s.kept)
                    stream = entropylong_parts(el_samples, L - 1, tok)
                else:
                    bins = [(max(1, int(a * L)), int(b * L)) for a, b in stage.mrcr_bins]
                    stream = mrcr_parts(passages, bins, L - 1, tok, cfg.mrcr, rng, skips)
                for parts, meta, row in stream:
                    if packer.emitted >= target:
                        break
                    if not packer.fits(sum(len(p) for p in parts)) and packer.emitted + 1 >= target:
                        packer.pad()  # the sample would open a sequence past the budget
                        break
                    n_samples += 1
                    writer.add_docs(kind)
                    packer.add_whole(parts, kind, meta)
                    if row is not None:  # the MRCR sample itself, in OpenAI-MRCR fields
                        mrcr_rows.append(row)
            # out of data before the budget: keep finished synthetic samples (pad the last
            # sequence); a partial sequence of streamed documents is dropped and counted
            if packer.emitted < target and kind not in ("natural", "regular"):
                packer.pad()
            dropped = packer.drop_partial()
            writer.add_dropped_tokens(kind, dropped)
            report.dropped_tokens += dropped
            report.sequences[kind] = packer.emitted
            report.samples[kind] = n_samples
            report.skips[kind] = {k: v for k, v in skips.items() if v}
            if packer.emitted < target:
                report.notes.setdefault(kind, f"ran out of data: {packer.emitted} of {target} sequences")
            log(f"   {stage.name}/{kind}: {packer.emitted}/{target} sequences from {n_samples} samples")
        report.pad_tokens = sw.pad_tokens
    if mrcr_rows:
        write_jsonl_atomic(out / "mrcr.jsonl", mrcr_rows)
    report.seconds = time.monotonic() - t0
    stats = {k: v for k, v in report.__dict__.items() if k != "dir"}
    atomic_write_text(out / "longctx.json", json.dumps(stats, indent=2, default=str))
    return report


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
        corpus = Corpus(cfg.documents, tok, log=log)
    uses = {k: any(getattr(s.mixture, k) > 0 for s in stages) for k in KINDS}
    index = None
    if uses["interleaved"] or uses["entropylong"]:
        with step(f"retrieval index ({cfg.index.retrieval.method})"):
            index = build_index(
                corpus, make_index(cfg.index.retrieval), cfg.interleave.chunk, cfg.index.max_chunks, tok
            )
            log(f"   {len(index)} meta-chunks indexed")
    el_samples: list[EntropyLongSample] = []
    if uses["entropylong"] and cfg.entropylong.docs:
        with step("entropylong verification"):
            el_samples = run_entropylong(cfg, corpus, index, log)
    passages = None
    if uses["mrcr"]:
        with step("mrcr passages"):
            passages = passage_pool([cfg.documents], cfg.mrcr.passages)
    reports = []
    for si, stage in enumerate(cfg.stages):
        if stage.name in {s.name for s in stages}:
            with step(f"stage {stage.name} (seq_len {stage.seq_len})"):
                reports.append(
                    _pack_stage(cfg, si, stage, corpus, tok, info, index, el_samples, passages, log)
                )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = LongCtxSummary(reports, summarize(el_samples), step.seconds, peak)
    record = {
        "stages": {r.name: {k: v for k, v in r.__dict__.items() if k != "dir"} for r in reports},
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
