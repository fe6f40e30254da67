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
from pydantic import Field, field_validator, model_validator

from core.cli import StepTimer
from core.config import StrictModel
from core.errors import ConfigError, InputError
from core.shards import ShardWriter, atomic_write_text
from pipelines.bpe_tokenizer import TokenizerConfig, load_or_train
from pipelines.longctx_pack import StageWriter, StreamPacker
from pipelines.longctx_sources import (
    Corpus,
    build_index,
    entropylong_parts,
    interleaved_samples,
    mrcr_parts,
    natural_docs,
)
from synth.entropylong import EntropyLongConfig, EntropyLongSample, build_sample, summarize
from synth.interleave import InterleaveConfig
from synth.lm import LMError
from synth.mrcr import MrcrConfig, passage_pool
from synth.natural import NaturalConfig, select_natural
from synth.retrieval import RetrievalConfig, make_index

KINDS = ("natural", "interleaved", "entropylong", "mrcr", "regular")


class Mixture(StrictModel):
    natural: float = Field(default=0.0, ge=0)
    interleaved: float = Field(default=0.0, ge=0)
    entropylong: float = Field(default=0.0, ge=0)
    mrcr: float = Field(default=0.0, ge=0)
    regular: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _sums_to_one(self) -> Mixture:
        total = sum(getattr(self, k) for k in KINDS)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"mixture fractions must sum to 1, got {total:g}")
        return self


class StageConfig(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    seq_len: int = Field(gt=16)
    token_budget: int = Field(gt=0)
    mixture: Mixture
    natural: NaturalConfig = NaturalConfig()
    # interleave documents of at least this fraction of seq_len (shorter ones would be
    # almost all distractors)
    interleave_min_frac: float = Field(default=0.125, gt=0, lt=1)
    # MRCR prompt-length bins as fractions of seq_len (room is left for the answer)
    mrcr_bins: list[tuple[float, float]] = [(0.25, 0.5), (0.5, 0.85)]
    # tokens per shard file (bounds the writer's memory for long sequences)
    shard_tokens: int = Field(default=1 << 24, gt=0)

    @field_validator("mrcr_bins")
    @classmethod
    def _fractions(cls, v: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if not v or any(not 0 < lo < hi <= 1 for lo, hi in v):
            raise ValueError(
                f"mrcr_bins must be [lo, hi] fractions of seq_len with 0 < lo < hi <= 1, got {v}"
            )
        return v


# GLM-5's 32K / 128K / 200K stages scaled to 4K / 8K / 16K and a quarter-million tokens each
# (configs/longctx.yaml says how to set the real sizes)
DEMO_STAGES = [
    StageConfig(name="stage1", seq_len=4096, token_budget=262144, natural=NaturalConfig(min_tokens=2048),
                mixture=Mixture(natural=0.4, interleaved=0.3, entropylong=0.05, mrcr=0.0, regular=0.25)),
    StageConfig(name="stage2", seq_len=8192, token_budget=262144, natural=NaturalConfig(min_tokens=4096),
                mixture=Mixture(natural=0.5, interleaved=0.3, entropylong=0.05, mrcr=0.0, regular=0.15)),
    StageConfig(name="stage3", seq_len=16384, token_budget=262144, natural=NaturalConfig(min_tokens=8192),
                mixture=Mixture(natural=0.4, interleaved=0.2, entropylong=0.05, mrcr=0.25, regular=0.1)),
]


class IndexConfig(StrictModel):
    max_chunks: int = Field(default=4000, gt=0)
    retrieval: RetrievalConfig = RetrievalConfig()


class LMConfig(StrictModel):
    # a transformers causal LM directory; None = SmolLM2-135M-Instruct via core.local_lm
    path: str | None = None
    data_dir: str = "data"
    # caps the all-kept-chunks check (its context keeps the nearest tokens)
    max_tokens: int = Field(default=1024, gt=16)
    # torch threads; 0 = torch's default (one thread wins on a busy machine)
    threads: int = Field(default=1, ge=0)


class EntropyLongVerify(EntropyLongConfig):
    """The job's defaults (configs/longctx.yaml's), on a subclass so that a partial ``verify``
    section keeps them. The LM runs on CPU: short documents and contexts; any same-domain text
    lowers entropy ~0.2-0.4 nats, so delta asks for more."""

    max_doc_tokens: int = Field(default=96, ge=8)
    max_context_tokens: int = Field(default=256, gt=0)
    candidates: int = Field(default=5, gt=0)
    delta: float = 0.5
    max_kept: int = Field(default=6, gt=0)


class EntropyLongJobConfig(StrictModel):
    # documents verified (the LM is the slow part on CPU)
    docs: int = Field(default=4, ge=0)
    min_chars: int = Field(default=600, gt=0)
    sources: list[str] | None = ["python-docs"]
    verify: EntropyLongVerify = EntropyLongVerify()


class LongCtxConfig(StrictModel):
    documents: str = "out/demo/documents"
    tokenizer: str = "out/demo/tokenizer/tokenizer.json"
    output: str = "out/longctx"
    seed: int = 0
    index: IndexConfig = IndexConfig()
    interleave: InterleaveConfig = InterleaveConfig()
    entropylong: EntropyLongJobConfig = EntropyLongJobConfig()
    lm: LMConfig = LMConfig()
    mrcr: MrcrConfig = MrcrConfig()
    stages: list[StageConfig] = DEMO_STAGES

    @field_validator("stages")
    @classmethod
    def _unique(cls, v: list[StageConfig]) -> list[StageConfig]:
        names = [s.name for s in v]
        if not v or len(set(names)) != len(names):
            raise ValueError(f"stages must be a non-empty list with unique names, got {names}")
        return v


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
        with open(out / "mrcr.jsonl", "w", encoding="utf-8") as fh:
            for row in mrcr_rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
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
