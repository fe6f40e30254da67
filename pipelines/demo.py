"""The demo job: real sample corpus -> documents -> tokenizer -> Arrow shards -> a few
training steps, with a summary of every stage.

    OUT/documents, OUT/rejects   kept and rejected documents (Parquet)
    OUT/tokenizer/tokenizer.json byte-level BPE trained on the kept documents
    OUT/shards/                  manifest.json + shard-*.arrow (the trainer's input)
    OUT/train/metrics.jsonl      loss per step of the tiny LM
    OUT/report/index.html        plots of the run (counts per stage and reason, lengths, mixture)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.cli import StepTimer
from core.config import StrictModel
from core.shards import Manifest
from pipelines.bpe_tokenizer import TokenizerConfig, load_or_train
from pipelines.documents_job import DocumentsJobConfig, run_documents
from pipelines.job import JobResult
from pipelines.pack import PackConfig, iter_documents, pack_documents
from pipelines.report import write_report
from pipelines.sample_corpus import SampleConfig, obtain_sample
from pipelines.stats import stage_table
from training.train_loop import TrainConfig, train


class DemoConfig(StrictModel):
    output: str = "out/demo"
    sample: SampleConfig = SampleConfig()
    documents: DocumentsJobConfig = DocumentsJobConfig()
    tokenizer: TokenizerConfig = TokenizerConfig()
    pack: PackConfig = PackConfig()
    train: TrainConfig = TrainConfig()


@dataclass
class DemoSummary:
    job: JobResult
    manifest: Manifest
    shard_dir: Path
    losses: list[float]
    timings: dict[str, float] = field(default_factory=dict)


def run_demo(cfg: DemoConfig, master: str | None = None, log: Callable[[str], None] = print) -> DemoSummary:
    out = Path(cfg.output)
    stage = StepTimer(log)

    with stage("sample corpus"):
        corpus = obtain_sample(cfg.sample, log=log)
    with stage(f"documents ({'datatrove local' if master is None else 'spark ' + master})"):
        # the demo always starts clean: its outputs are a picture of this one run
        job = run_documents(
            "demo",
            corpus.inputs(),
            out,
            cfg.documents,
            master,
            overwrite=True,
            config_record=cfg.model_dump(),
        )
    with stage("tokenizer"):
        texts = (row[1] for rows in iter_documents(job.documents_dir, 64) for row in rows)
        tok, info = load_or_train(cfg.tokenizer, texts if not cfg.tokenizer.path else None, out / "tokenizer")
    with stage("tokenize + pack"):
        manifest = pack_documents(
            job.documents_dir, tok, info, out / "shards", cfg.pack, job_config=cfg.model_dump()
        )
    with stage("train"):
        metrics_path = out / "train" / "metrics.jsonl"
        metrics_path.parent.mkdir(parents=True, exist_ok=True)
        state = train(out / "shards", cfg.train, metrics_path, log=lambda m: log("   " + m))
    with stage("report"):
        log(f"   {write_report(out)}")
    return DemoSummary(job, manifest, out / "shards", [m["loss"] for m in state["metrics"]], stage.seconds)


def print_summary(s: DemoSummary) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = {name: s.job.counts[name].model_dump() for name in s.job.stages}
    console.print(stage_table(f"documents per stage ({s.job.engine})", counts, top=3))
    m = s.manifest
    t = Table(
        title=f"shards: seq_len {m.seq_len}, tokenizer {m.tokenizer.id} (vocab {m.tokenizer.vocab_size})"
    )
    for col in ("source", "docs", "sequences", "tokens", "tokens dropped"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for src, c in m.counts.items():
        t.add_row(src, str(c.docs), str(c.sequences), f"{c.tokens:,}", str(c.tokens_dropped))
    t.add_row(
        "total",
        str(m.totals.docs),
        str(m.totals.sequences),
        f"{m.totals.tokens:,}",
        str(m.totals.tokens_dropped),
    )
    console.print(t)
    # plain prints: paths and numbers must not be re-wrapped by rich
    print(f"tokens written: {m.totals.tokens:,} in {len(m.shards)} shards:")
    for info in m.shards:
        print(f"  {s.shard_dir / info.file}  ({info.sequences} sequences, sha256 {info.sha256[:12]}…)")
    if s.losses:
        shown = ", ".join(f"{x:.3f}" for x in s.losses)
        print(f"training loss over {len(s.losses)} steps: {shown}")
    print("time per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in s.timings.items()))
