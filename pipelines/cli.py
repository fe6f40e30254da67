"""``python -m pipelines``: one subcommand per job, plus ``stats``.

``--master`` picks the engine (``core.engine.make_engine``, the one place it is read): omitted =
the local engine (datatrove's executor, worker processes); ``local[N]`` or ``spark://host:port``
= Spark; under spark-submit, its own master. User errors (bad config, missing input, corrupt
shard) print one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from core.cache import cache_dir
from core.cli import load_cli_config, user_errors
from core.engine import make_engine
from core.storage import is_url, staged_output

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="GLM-5 recipe data jobs (datatrove locally, Spark with --master).",
)

URL_OUTPUT_HELP = ("or a URL (s3://bucket/prefix/): the job runs in a local staging directory (--staging) "
                   "and the finished output is uploaded, job.json last")
URL_INPUT_HELP = "or an object-storage URL (s3://bucket/prefix/, AWS_* environment); repeatable"


def staging_dir(given: Path | None) -> Path:
    """Where outputs bound for a URL are written first (per URL, so an interrupted run resumes)."""
    return given or cache_dir() / "staging"


STAGING_HELP = "local directory for outputs bound for a URL (default: the cache's staging/)"


MASTER_HELP = ("Spark master (local[2], spark://host:7077); omit to run on datatrove's local executor "
               "(under spark-submit: its --master)")


@app.command()
@user_errors
def demo(
    config: Path = typer.Option(Path("configs/demo.yaml"), help="DemoConfig YAML"),
    master: str = typer.Option(None, help=MASTER_HELP),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set train.steps=5"),
) -> None:
    """Sample corpus -> documents -> tokenizer -> Arrow shards -> a few training steps."""
    from pipelines.jobs import demo as job

    cfg = load_cli_config(job.DemoConfig, config, set_)
    with make_engine(master, cfg.web.local, cfg.web.spark) as engine:
        job.print_summary(job.run(cfg, engine))


@app.command()
@user_errors
def documents(
    input: list[str] = typer.Option(
        ..., "--input", help="file, directory or glob (.html[.gz], .jsonl[.gz], .parquet, .txt, .warc[.gz]), or "
        "an object-storage URL (s3://bucket/prefix/, AWS_* environment); repeatable"
    ),
    output: str = typer.Option(..., help=f"output directory (documents/, rejects/, job.json) {URL_OUTPUT_HELP}"),
    master: str = typer.Option(None, help=MASTER_HELP),
    config: Path = typer.Option(None, help="DocumentsJobConfig YAML"),
    source: str = typer.Option(None, help="mixture name for the inputs (default: file/directory name)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set local.tasks=8"),
    overwrite: bool = typer.Option(False, help="replace an existing output of a different job"),
    staging: Path = typer.Option(None, help=STAGING_HELP),
) -> None:
    """Read -> HTML extraction -> length -> Gopher repetition; kept docs and rejects as Parquet."""
    from pipelines.inputs import InputSpec
    from pipelines.jobs import documents as job
    from pipelines.report.stats import collect_stats, render

    cfg = load_cli_config(job.DocumentsJobConfig, config, set_)
    specs = [InputSpec(path=p, source=source) for p in input]
    with staged_output(output, staging_dir(staging), replace=overwrite) as out:
        with make_engine(master, cfg.local, cfg.spark) as engine:
            result = job.run(cfg, specs, out, engine, overwrite=overwrite)
        stats = collect_stats(result.out_dir)
    render(stats)


@app.command()
@user_errors
def web(
    input: list[str] = typer.Option(..., "--input", help="HTML/WARC/JSONL/Parquet file, directory or glob, or an "
                                    "object-storage URL (s3://bucket/prefix/, AWS_* environment); repeatable"),
    output: str = typer.Option(..., help=f"output directory (documents/, rejects/, job.json, models/) "
                               f"{URL_OUTPUT_HELP}"),
    master: str = typer.Option(None, help=MASTER_HELP),
    config: Path = typer.Option(None, help="WebConfig YAML (e.g. configs/web.yaml)"),
    source: str = typer.Option(None, help="mixture name for the inputs (default: file/directory name)"),
    glob: str = typer.Option(None, help="only files of input directories matching this pattern, e.g. '*.html'"),
    max_files: int = typer.Option(None, help="read only the first N files of each input directory"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set dclm.keep_top_fraction=0.2"),
    resume: bool = typer.Option(False, help="keep finished tasks of an interrupted run with the same config"),
    staging: Path = typer.Option(None, help=STAGING_HELP),
) -> None:
    """Web quality filtering: heuristics, language, DCLM top-p%, LLM edu scoring, AI/template exclusion."""
    from pipelines.inputs import InputSpec
    from pipelines.jobs import web as job

    cfg = load_cli_config(job.WebConfig, config, set_)
    specs = [InputSpec(path=p, source=source, glob=glob, max_files=max_files) for p in input]
    # the web job replaces its output unless resuming; so does its upload
    with staged_output(output, staging_dir(staging), replace=True) as out:
        with make_engine(master, cfg.local, cfg.spark) as engine:
            summary = job.run(cfg, specs, out, engine, resume=resume)
    job.print_web_summary(summary)


@app.command("quality-eval")
@user_errors
def quality_eval(
    data_dir: Path = typer.Option(None, help="sample corpus / model cache (default: the user cache; "
                                  "`python -m samples corpus` fills it)"),
    pages: int = typer.Option(200, help="documentation pages used for the DCLM data"),
    n: int = typer.Option(96, help="human passages for the machine-text set (about as many generated)"),
    output: Path = typer.Option(Path("out/quality_eval"), help="where the evaluated models are saved"),
) -> None:
    """Held-out precision/recall of the DCLM classifier and the machine-text detector on the sample."""
    from pipelines.jobs.quality_eval import dclm_eval, machine_text_eval

    output.mkdir(parents=True, exist_ok=True)
    typer.echo(dclm_eval(data_dir, pages, output))
    typer.echo(machine_text_eval(data_dir, n, output))


@app.command()
@user_errors
def dedup(
    input: list[str] = typer.Option(
        ..., "--input", help=f"Parquet/JSONL documents (file, directory or glob), {URL_INPUT_HELP}"
    ),
    output: str = typer.Option(
        ..., help=f"output directory (documents/, rejects/, job.json) {URL_OUTPUT_HELP}"
    ),
    master: str = typer.Option(None, help=MASTER_HELP),
    config: Path = typer.Option(None, help="DedupJobConfig YAML"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set minhash.bands=20"),
    resume: bool = typer.Option(False, help="keep finished tasks of an interrupted run with the same config"),
    staging: Path = typer.Option(None, help=STAGING_HELP),
) -> None:
    """MinHash near-duplicate removal: keeps the smallest id of each cluster; duplicates to rejects."""
    from pipelines.inputs import InputSpec
    from pipelines.jobs import dedup as job

    cfg = load_cli_config(job.DedupJobConfig, config, set_)
    # the dedup job replaces its output unless resuming; so does its upload
    with staged_output(output, staging_dir(staging), replace=True) as out:
        with make_engine(master, cfg.local, cfg.spark) as engine:
            summary = job.run(cfg, [InputSpec(path=p) for p in input], out, engine, resume=resume)
    for stage, c in summary["counts"].items():
        typer.echo(f"{stage}: in {c['docs_in']}, kept {c['kept']}, rejected {c['rejected']} {c['reasons']}")
    typer.echo(json.dumps(summary["corpus"]["minhash"]))


@app.command("dedup-eval")
@user_errors
def dedup_eval(
    data_dir: Path = typer.Option(None, help="sample corpus cache (default: the user cache; "
                                  "`python -m samples corpus` fills it)"),
    pairs_per_bin: int = typer.Option(60, help="planted near-duplicate pairs per Jaccard bin"),
    unrelated: int = typer.Option(300, help="unrelated passages mixed in"),
    set_: list[str] = typer.Option(None, "--set", help="MinhashConfig override, e.g. --set bands=20"),
) -> None:
    """Recall per Jaccard bin and precision of MinHash dedup on near-duplicates planted in real text."""
    from core.cache import cache_dir
    from core.cached_samples import SampleConfig, sample_corpus
    from filters.minhash import MinhashConfig
    from pipelines.jobs.dedup_eval import evaluate

    cfg = load_cli_config(MinhashConfig, None, set_)
    corpus = sample_corpus(SampleConfig(data_dir=str(cache_dir(data_dir))))
    typer.echo(f"MinHash: {cfg.bands} bands x {cfg.rows} rows, word {cfg.ngram}-grams (threshold ~{cfg.threshold():.2f})")
    typer.echo(evaluate(corpus.books_jsonl, cfg, pairs_per_bin, unrelated).table())


@app.command()
@user_errors
def pack(
    documents: str = typer.Option(
        ...,
        help="documents dataset (directory of Parquet files), or an object-storage "
        "URL of one (s3://bucket/prefix/documents/, AWS_* environment)",
    ),
    output: str = typer.Option(
        ...,
        help=f"shard directory to write (manifest.json, shard-*.arrow, tokenizer/) "
        f"{URL_OUTPUT_HELP.replace('job.json', 'manifest.json')}",
    ),
    tokenizer: Path = typer.Option(None, help="tokenizer.json to use; default: train a byte-level BPE"),
    vocab_size: int = typer.Option(8192, help="vocab size of the BPE trained when no --tokenizer"),
    seq_len: int = typer.Option(1024),
    stage: str = typer.Option("pretrain", help="mid-training stage recorded in the manifest"),
    staging: Path = typer.Option(None, help=STAGING_HELP),
) -> None:
    """Tokenize + pack documents into fixed-length sequences -> Arrow shards + manifest."""
    import duckdb

    from core.tokenizer import TokenizerConfig, load_or_train
    from pipelines.pack import PackConfig, count_documents, iter_documents, pack_documents
    from pipelines.report.stats import render, shard_stats

    count_documents(documents)  # a missing dataset or a bad URL: one line before any work
    tcfg = TokenizerConfig(path=str(tokenizer) if tokenizer else None, vocab_size=vocab_size)
    pcfg = PackConfig(seq_len=seq_len, stage=stage)
    # pack rewrites its shard directory (ShardWriter); an upload replaces a pack output alike
    with staged_output(output, staging_dir(staging), replace=True) as out:
        texts = None if tokenizer else (r[1] for rows in iter_documents(documents, 64) for r in rows)
        tok, info = load_or_train(tcfg, texts, Path(out) / "tokenizer")
        pack_documents(
            documents,
            tok,
            info,
            out,
            pcfg,
            job_config={"tokenizer": tcfg.model_dump(), "pack": pcfg.model_dump()},
        )
        stats = shard_stats(duckdb.connect(), Path(out))
    render({"shards": stats})


@app.command()
@user_errors
def longctx(
    config: Path = typer.Option(Path("configs/longctx.yaml"), help="LongCtxConfig YAML"),
    stage: list[str] = typer.Option(None, help="only this stage (repeatable); default: all"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set entropylong.docs=2"),
) -> None:
    """Documents -> long-context mid-training shards per stage (natural, NExtLong, EntropyLong, MRCR)."""
    from pipelines.jobs.longctx import print_summary, run_longctx
    from pipelines.jobs.longctx_config import LongCtxConfig

    print_summary(run_longctx(load_cli_config(LongCtxConfig, config, set_), only=stage or None))


@app.command("swe-mine")
@user_errors
def swe_mine(
    events: list[str] = typer.Option(
        None, "--events", help=f"GH-Archive-style event files/dirs (.json.gz), {URL_INPUT_HELP}"
    ),
    api: list[str] = typer.Option(
        None, "--api", help=f"GitHub API JSON dumps or recorded cassettes, {URL_INPUT_HELP}"
    ),
    repos: list[str] = typer.Option(
        None,
        "--repos",
        help="a git repository or a directory of them, or an "
        "object-storage URL of one (fetched to --staging first: git reads files by "
        "path); repeatable",
    ),
    output: str = typer.Option(
        ..., help=f"output directory (documents/, rejects/, instances.jsonl, shards/) {URL_OUTPUT_HELP}"
    ),
    master: str = typer.Option(None, help=MASTER_HELP.replace("datatrove's local executor", "DuckDB")),
    config: Path = typer.Option(
        None, help="SweMineConfig YAML (e.g. configs/swe_mine.yaml); default: built-in"
    ),
    benchmark: list[str] = typer.Option(
        None, "--benchmark", help="SWE-bench-style JSONL to decontaminate against (a file or an object URL)"
    ),
    set_: list[str] = typer.Option(
        None, "--set", help="override a key, e.g. --set mining.patch_filter.max_files=10"
    ),
    overwrite: bool = typer.Option(False, help="replace a swe-mine output of other inputs or config"),
    staging: Path = typer.Option(
        None, help=STAGING_HELP + "; repositories given as URLs are fetched there too"
    ),
) -> None:
    """Issue–PR mining: link, filter, decontaminate, relevant files -> documents, SWE-bench instances, shards."""
    from pipelines.jobs import swe_mine as job

    cfg = load_cli_config(job.SweMineConfig, config, set_)
    cfg.mining.decontaminate.benchmarks += list(benchmark or [])
    inputs = job.MineInputs(events=events or [], api=api or [], repos=repos or [])
    with staged_output(output, staging_dir(staging), replace=overwrite) as out:
        with make_engine(master, cfg.local, cfg.spark) as engine:
            result = job.run(cfg, inputs, out, engine, overwrite=overwrite, staging=staging_dir(staging))
    job.print_summary(result, where=output if is_url(output) else None)


@app.command()
@user_errors
def report(
    output: Path = typer.Argument(..., help="a job's output directory (documents/, rejects/, job.json)"),
) -> None:
    """Write OUT/report/index.html with PNG plots (counts per stage/reason, scores, lengths, clusters, mixture)."""
    from pipelines.report.html import write_report

    typer.echo(str(write_report(output)))


@app.command()
@user_errors
def stats(
    path: Path = typer.Argument(..., help="job output, documents/rejects dataset, or shard directory"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Counts for any output directory: documents, rejects per stage/reason, tokens, mixture."""
    from pipelines.report.stats import collect_stats, render

    result = collect_stats(path)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        render(result)
