"""``python -m pipelines``: one subcommand per job, plus ``stats``.

``--master`` picks the engine: omitted = datatrove's local executor; ``local[N]`` or
``spark://host:port`` = Spark. User errors (bad config, missing input, corrupt shard) print
one line and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path

import typer

from core.config import load_config, validate_config
from core.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="GLM-5 recipe data jobs (datatrove locally, Spark with --master).",
)

MASTER_HELP = "Spark master (local[2], spark://host:7077); omit to run on datatrove's local executor"


def user_errors(fn: Callable) -> Callable:
    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def _load(model, config: Path | None, overrides: list[str] | None):
    from core.config import apply_overrides

    if config is not None:
        return load_config(model, config, overrides)
    return validate_config(model, apply_overrides({}, overrides or []), source="--set")


@app.command()
@user_errors
def demo(
    config: Path = typer.Option(Path("configs/demo.yaml"), help="DemoConfig YAML"),
    master: str = typer.Option(None, help=MASTER_HELP),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set train.steps=5"),
) -> None:
    """Sample corpus -> documents -> tokenizer -> Arrow shards -> a few training steps."""
    from pipelines.demo import DemoConfig, print_summary, run_demo

    cfg = _load(DemoConfig, config, set_)
    print_summary(run_demo(cfg, master=master))


@app.command()
@user_errors
def documents(
    input: list[Path] = typer.Option(
        ..., "--input", help="file or directory (.html[.gz], .jsonl[.gz], .parquet, .txt); repeatable"
    ),
    output: Path = typer.Option(..., help="output directory (documents/, rejects/, job.json)"),
    master: str = typer.Option(None, help=MASTER_HELP),
    config: Path = typer.Option(None, help="DocumentsJobConfig YAML"),
    source: str = typer.Option(None, help="mixture name for the inputs (default: file/directory name)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set local.tasks=8"),
    overwrite: bool = typer.Option(False, help="replace an existing output of a different job"),
) -> None:
    """Read -> HTML extraction -> length -> Gopher repetition; kept docs and rejects as Parquet."""
    from pipelines.documents_job import DocumentsJobConfig, run_documents
    from pipelines.readers import InputSpec
    from pipelines.stats import collect_stats, render

    cfg = _load(DocumentsJobConfig, config, set_)
    specs = [InputSpec(path=str(p), source=source) for p in input]
    result = run_documents("documents", specs, output, cfg, master, overwrite)
    render(collect_stats(result.out_dir))


@app.command()
@user_errors
def pack(
    documents: Path = typer.Option(..., help="documents dataset (directory of Parquet files)"),
    output: Path = typer.Option(..., help="shard directory to write"),
    tokenizer: Path = typer.Option(None, help="tokenizer.json to use; default: train a byte-level BPE"),
    vocab_size: int = typer.Option(8192, help="vocab size of the BPE trained when no --tokenizer"),
    seq_len: int = typer.Option(1024),
    stage: str = typer.Option("pretrain", help="mid-training stage recorded in the manifest"),
) -> None:
    """Tokenize + pack documents into fixed-length sequences -> Arrow shards + manifest."""
    from pipelines.bpe_tokenizer import TokenizerConfig, load_or_train
    from pipelines.pack import PackConfig, iter_documents, pack_documents
    from pipelines.stats import render, shard_stats

    tcfg = TokenizerConfig(path=str(tokenizer) if tokenizer else None, vocab_size=vocab_size)
    texts = None if tokenizer else (r[1] for rows in iter_documents(documents, 64) for r in rows)
    tok, info = load_or_train(tcfg, texts, output / "tokenizer")
    pcfg = PackConfig(seq_len=seq_len, stage=stage)
    pack_documents(
        documents,
        tok,
        info,
        output,
        pcfg,
        job_config={"tokenizer": tcfg.model_dump(), "pack": pcfg.model_dump()},
    )
    import duckdb

    render({"shards": shard_stats(duckdb.connect(), output)})


@app.command()
@user_errors
def sample(
    data_dir: Path = typer.Option(Path("data"), help="cache directory"),
) -> None:
    """Obtain the real sample corpus (Debian packages) into the cache and print its inputs."""
    from pipelines.sample_corpus import SampleConfig, obtain_sample

    corpus = obtain_sample(SampleConfig(data_dir=str(data_dir)))
    for spec in corpus.inputs():
        typer.echo(f"{spec.source}: {spec.path}")


@app.command()
@user_errors
def stats(
    path: Path = typer.Argument(..., help="job output, documents/rejects dataset, or shard directory"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Counts for any output directory: documents, rejects per stage/reason, tokens, mixture."""
    from pipelines.stats import collect_stats, render

    result = collect_stats(path)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        render(result)
