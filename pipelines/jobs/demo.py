"""The demo job: the whole GLM-5 data recipe on bounded samples, then the GLM-5-shaped model.

    sample corpus      Python docs HTML pages (+ the novels the DCLM classifier learns from)
    web quality        heuristics, language ID, MinHash dedup, templates, DCLM top-p%,
                       LLM edu scoring (SmolLM2 behind our own server), distillation, threshold
    tokenizer          byte-level BPE on the kept documents
    swe-mine           issue-PR mining on recorded GitHub data and sample clones
    long-context       stage-1 data: natural, NExtLong, EntropyLong, regular components
    shards             the pretraining mixture (web + swe; one `source` per component)
    pretrain           the tiny GLM-5-shaped model (MLA, MoE, MTP, MuonSplit) through
                       training.trainer on the mixture -> train/pretrain/step-*
    mid-train          from that checkpoint, the long-context stage -> train/midtrain/step-*
    post-training      SFT from the mid-trained checkpoint -> one RL stage -> distillation ->
                       a Hugging Face export (``pipelines.jobs.demo_posttrain``)
    report             one HTML page covering every stage

The BPE reserves the GLM-5 chat template's special tokens, so SFT and RL continue the pretrained
model without resizing it. Outputs under ``output`` (default out/demo): documents/, rejects/,
job.json (the web job), tokenizer/, swe/, longctx/, shards/, train/metrics.jsonl, train/{pretrain,
midtrain}/, sft/, rl/, hf/, report/index.html, demo.json (``stages``: name, seconds, input and
output checkpoint and a headline metric per stage of the recipe).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from core.cached_samples import SampleConfig, sample_corpus, swe_mine_sample
from core.cli import StepTimer
from core.config import StrictModel
from core.engine import Engine
from core.io import atomic_write_text
from core.shards import Manifest
from core.tokenizer import TokenizerConfig, load_or_train
from filters.length import LengthConfig
from pipelines.inputs import sample_inputs
from pipelines.jobs import swe_mine, web
from pipelines.jobs.demo_posttrain import DemoPostConfig
from pipelines.jobs.longctx import run_longctx
from pipelines.jobs.longctx_config import EntropyLongJobConfig, LongCtxConfig, LongCtxStageConfig, Mixture
from pipelines.jobs.swe_mine import MineInputs, SweMineConfig
from pipelines.jobs.web import EduJobConfig, WebConfig, WebDclmConfig, WebEduConfig
from pipelines.pack import PackConfig, iter_documents, pack_documents
from pipelines.preflight import require_file
from synth.natural import NaturalConfig
from training.chat_template import SPECIAL_TOKENS


# bounded so the whole recipe runs in minutes on two cores (configs/demo.yaml says why each); built with
# each config, not once at import, so that their cache paths are the cache of that moment
def demo_web() -> WebConfig:
    return WebConfig(
        length=LengthConfig(min_chars=200, max_chars=20000),
        dclm=WebDclmConfig(keep_top_fraction=0.5),
        edu=EduJobConfig(llm_sample_docs=6, score=WebEduConfig(threshold=1.4)),
        local=WebConfig().local.model_copy(update={"tasks": 4}),
    )


def demo_longctx() -> LongCtxConfig:
    return LongCtxConfig(
        stages=[LongCtxStageConfig(name="stage1", seq_len=4096, token_budget=32768,
                                   natural=NaturalConfig(min_tokens=2048),
                                   mixture=Mixture(natural=0.4, interleaved=0.3, entropylong=0.05, regular=0.25))],
        entropylong=EntropyLongJobConfig(docs=1),
    )


class DemoTrainConfig(StrictModel):
    config: str = "configs/train_tiny.yaml"  # the trainer's YAML (the GLM-5-shaped tiny model)
    pretrain_steps: int = Field(default=12, gt=0)  # on the mixture shards
    longctx_steps: int = Field(default=1, ge=0)  # then on the long-context stage (0 skips it)
    longctx_batch_size: int = Field(default=1, gt=0)
    # `key.path=value` for the trainer config; by default GLM-5's DSA sparse attention at toy size
    # (a 2-head indexer, top-128 keys, 3 dense warm-up steps that train only the indexer)
    overrides: list[str] = ["model.dsa_indexer_n_heads=2", "model.dsa_indexer_head_dim=32", "model.dsa_indexer_topk=128",
                            "model.dsa_indexer_loss_coeff=1.0", "dsa_warmup_steps=3"]


class DemoConfig(StrictModel):
    output: str = "out/demo"
    sample: SampleConfig = Field(default_factory=lambda: SampleConfig(max_html_pages=120))
    web: WebConfig = Field(default_factory=demo_web)
    tokenizer: TokenizerConfig = TokenizerConfig()
    swe: SweMineConfig = SweMineConfig()
    longctx: LongCtxConfig = Field(default_factory=demo_longctx)  # documents/tokenizer/output are set under `output`
    pack: PackConfig = PackConfig(seq_len=512, sequences_per_shard=4096, stage="demo")
    train: DemoTrainConfig = DemoTrainConfig()
    post: DemoPostConfig = DemoPostConfig()  # SFT -> RL -> distillation -> HF export


@dataclass
class DemoSummary:
    out: Path
    web: dict[str, Any]
    swe: dict[str, Any]
    longctx: dict[str, Any]
    manifest: Manifest
    losses: list[float]
    report: Path
    timings: dict[str, float] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)


def _in_repo(path: str) -> str:
    """A relative trainer YAML missing here is the repository's (the demo runs from any directory)."""
    repo = Path(__file__).resolve().parents[2] / path
    return str(repo) if not Path(path).exists() and not Path(path).is_absolute() and repo.exists() else path


def _trainer_config(cfg: DemoConfig, out: Path, longctx_dir: Path | None = None, init_from: Path | None = None):
    """Pretraining on the mixture, or (``longctx_dir``) mid-training from ``init_from``: each run
    writes its final checkpoint for the next stage."""
    from training.train_config import load_trainer_config

    tcfg = load_trainer_config(_in_repo(cfg.train.config), cfg.train.overrides)
    if longctx_dir is None:
        stages = [{"name": "pretrain", "shards": str(out / "shards"), "steps": cfg.train.pretrain_steps}]
        return tcfg.model_validate(tcfg.model_dump() | {"stages": stages,
                                                        "checkpoint": {"dir": str(out / "train" / "pretrain")}})
    stages = [{"name": "longctx", "shards": str(longctx_dir), "steps": cfg.train.longctx_steps,
               "batch_size": cfg.train.longctx_batch_size}]
    # the indexer was warmed up in pretraining; one LR (pretraining's last) for the short stage
    return tcfg.model_validate(tcfg.model_dump() | {
        "stages": stages, "init_from": str(init_from) if init_from else None, "dsa_warmup_steps": 0,
        "schedule": {"kind": "constant", "warmup_steps": 0},
        "optimizer": tcfg.optimizer.model_dump() | {"lr": tcfg.optimizer.lr * tcfg.schedule.min_lr_ratio},
        "checkpoint": {"dir": str(out / "train" / "midtrain")}})  # fmt: skip


def run(cfg: DemoConfig, engine: Engine, log: Callable[[str], None] = print) -> DemoSummary:
    """The whole recipe into ``cfg.output``; every data job on ``engine`` (the CLI makes it from
    the web section's ``local``/``spark`` settings)."""
    from training.trainer import train

    out = Path(cfg.output).absolute()
    # the trainer's config is checked before the data stages run, not after them
    require_file("train.config", _in_repo(cfg.train.config))
    _trainer_config(cfg, out)
    stage = StepTimer(log)
    records: list[dict[str, Any]] = []

    with stage("sample corpus"):
        corpus = sample_corpus(cfg.sample)  # `python -m samples demo` puts both in the cache
        swe_inputs = swe_mine_sample(cfg.sample.data_dir)
    with stage(f"web quality ({engine.name})"):
        html = sample_inputs(corpus)[:1]  # the pages; the novels are the DCLM classifier's positives
        web_cfg = cfg.web.model_copy(update={
            "dclm_data": cfg.web.dclm_data.model_copy(update={"positives": [str(corpus.books_jsonl)]})})
        # the demo always starts clean: its outputs are a picture of this one run
        web_summary = web.run(web_cfg, html, out, engine, log=log)
    with stage("tokenizer"):
        texts = (row[1] for rows in iter_documents(out / "documents", 64) for row in rows)
        # the chat template's tokens are reserved now, so post-training needs no new embeddings
        tok_cfg = cfg.tokenizer.model_copy(update={"special_tokens": [*cfg.tokenizer.special_tokens, *SPECIAL_TOKENS]})
        tok, info = load_or_train(tok_cfg, texts if not cfg.tokenizer.path else None, out / "tokenizer")
    with stage(f"swe-mine ({engine.name})"):
        swe_cfg = cfg.swe.model_copy(update={
            "tokenizer": TokenizerConfig(path=str(out / "tokenizer" / "tokenizer.json")), "pack_shards": False})
        inputs = MineInputs(events=[str(swe_inputs["events"])], api=[str(swe_inputs["api"])],
                            repos=[str(swe_inputs["repos"])])
        mined = swe_mine.run(swe_cfg, inputs, out / "swe", engine, overwrite=True, progress=False)
        log(f"   {mined.documents} issue-PR documents, {mined.instances} SWE-bench instances")
    longctx_dir = None
    with stage("long-context data"):
        lcfg = cfg.longctx.model_copy(update={"documents": str(out / "documents"),
                                              "tokenizer": str(out / "tokenizer" / "tokenizer.json"),
                                              "output": str(out / "longctx")})
        lsum = run_longctx(lcfg, log=lambda m: log("   " + m))
        if cfg.train.longctx_steps and lsum.stages:
            longctx_dir = lsum.stages[0].dir
    with stage("mixture shards"):
        sources = [out / "documents"] + ([out / "swe" / "documents"] if mined.documents else [])
        manifest = pack_documents(sources, tok, info, out / "shards", cfg.pack, job_config=cfg.model_dump())
        for src, c in manifest.counts.items():
            log(f"   {src}: {c.docs} documents, {c.sequences} sequences, {c.tokens:,} tokens")
    records.append({"name": "data", "seconds": round(sum(stage.seconds.values()), 1), "input_checkpoint": None,
                    "output_checkpoint": str(out / "shards"), "metric": "mixture tokens",
                    "value": manifest.totals.tokens})  # fmt: skip
    shutil.rmtree(out / "train", ignore_errors=True)  # the demo always starts clean
    metrics_path = out / "train" / "metrics.jsonl"
    with stage(name := "pretrain (training.trainer, GLM-5-shaped)"):
        result = train(_trainer_config(cfg, out), None, metrics_path, log=lambda m: log("   " + m))
    records.append(_train_record("pretrain", stage.seconds[name], None, result))
    losses = [m["loss"] for m in result.metrics]
    if longctx_dir is not None:
        with stage(name := "mid-train (long context, from the pretrained checkpoint)"):
            mid = train(_trainer_config(cfg, out, longctx_dir, result.checkpoint), None, out / "train" / "midtrain.jsonl",
                        log=lambda m: log("   " + m))
            _append_metrics(metrics_path, mid.metrics, len(result.metrics))
        records.append(_train_record("midtrain", stage.seconds[name], result.checkpoint, mid))
        losses += [m["loss"] for m in mid.metrics]
        result = mid
    if cfg.post.sft_steps:
        from pipelines.jobs import demo_posttrain as post

        with stage("sft (training.sft, from the mid-trained checkpoint)"):
            records.append(post.sft(cfg.post, result.checkpoint, out / "sft", log))
        with stage("rl + distillation (training.rl stages, text task)"):
            records += post.rl_and_distill(cfg.post, Path(records[-1]["output_checkpoint"]), out / "rl", log)
        with stage("export (training.hf export, loaded by transformers)"):
            records.append(post.export(Path(records[-1]["output_checkpoint"]), out / "hf", log))
    with stage("report"):
        from pipelines.report.demo import write_demo_report

        report = write_demo_report(out, stage.seconds)
        log(f"   {report}")
    swe = json.loads((out / "swe" / "job.json").read_text())
    longctx = json.loads((out / "longctx" / "summary.json").read_text())
    summary = DemoSummary(out, web_summary, swe, longctx, manifest, losses, report, dict(stage.seconds), records)
    atomic_write_text(out / "demo.json", json.dumps({"stages": records, "timings": summary.timings,
                                                     "losses": summary.losses, "config": cfg.model_dump()},
                                                    indent=2, default=str))
    return summary


def _train_record(name: str, seconds: float, start: Path | None, result) -> dict[str, Any]:
    return {"name": name, "seconds": round(seconds, 1),
            "input_checkpoint": str(start) if start else None, "output_checkpoint": str(result.checkpoint),
            "metric": "loss first -> last", "value": [result.metrics[0]["loss"], result.metrics[-1]["loss"]]}


def _append_metrics(path: Path, rows: list[dict[str, Any]], offset: int) -> None:
    """Mid-training's rows after pretraining's in one metrics file (the report plots both), steps continued."""
    with open(path, "a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({**r, "step": r["step"] + offset}) + "\n")


def print_summary(s: DemoSummary) -> None:
    from rich.console import Console

    from pipelines.report.stats import stage_table

    console = Console()
    console.print(stage_table(f"web quality ({s.web['engine']}): documents per stage", s.web["counts"], top=3))
    console.print(stage_table(f"swe-mine ({s.swe['engine']}): records per stage", s.swe["counts"], top=3))
    # plain prints: paths and numbers must not be re-wrapped by rich
    for name, st in s.longctx["stages"].items():
        print(f"long-context {name} (seq_len {st['seq_len']}): sequences {st['sequences']}")
    m = s.manifest
    print(f"mixture shards (seq_len {m.seq_len}, tokenizer vocab {m.tokenizer.vocab_size}): "
          + ", ".join(f"{src} {c.sequences} seq / {c.tokens:,} tokens" for src, c in m.counts.items()))
    print(f"tokens written: {m.totals.tokens:,} in {len(m.shards)} shards:")
    for info in m.shards:
        print(f"  {s.out / 'shards' / info.file}  ({info.sequences} sequences, sha256 {info.sha256[:12]}…)")
    if s.losses:
        print(f"training loss over {len(s.losses)} steps: " + ", ".join(f"{x:.3f}" for x in s.losses))
    print(f"metrics: {s.out / 'train' / 'metrics.jsonl'}")
    print(f"report: {s.report}")
    for r in s.stages:
        print(f"stage {r['name']}: {r['seconds']}s, {r['metric']} {r['value']}; "
              f"{r['input_checkpoint'] or '-'} -> {r['output_checkpoint']}")
    print("time per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in s.timings.items()))
