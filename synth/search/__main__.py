"""``python -m synth.search``: generate verified multi-hop search tasks, and grade responses.

python -m synth.search generate --corpus DOCS --n N --out tasks.jsonl
python -m synth.search grade --tasks tasks.jsonl --responses R.jsonl      # last line: mean score
python -m synth.search solve --tasks tasks.jsonl --corpus DOCS --out R.jsonl   # BM25 tool-solver responses
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import typer

from core.cli import load_cli_config, user_errors
from core.errors import UserError
from core.io import atomic_write_text, read_jsonl, write_jsonl_atomic

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Deep-search (multi-hop retrieval) tasks.")


@app.command()
@user_errors
def generate(
    corpus: Path = typer.Option(..., help="a directory of HTML pages (links = their <a href>) or JSONL "
                                          "{id, text, title?, links?}; e.g. the sample's Python docs"),
    n: int = typer.Option(..., "--n", min=1, help="number of tasks"),
    out: Path = typer.Option(..., help="tasks JSONL; OUT.stats.json gets the counts and reject reasons"),
    config: Path = typer.Option(None, help="SearchConfig YAML (configs/terminal_search.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set hops=[3]"),
    max_docs: int = typer.Option(0, min=0, help="read only the first N documents (0 = all)"),
) -> None:
    """Write N multi-hop questions, each checked: unique answer, needs retrieval, solvable with BM25."""
    from synth.search.corpus import load_corpus
    from synth.search.generate import Generator, SearchConfig

    cfg = load_cli_config(SearchConfig, config, set_)
    docs = load_corpus(corpus, max_docs or None)
    typer.echo(f"corpus: {len(docs)} documents, {sum(len(d.links) for d in docs.docs.values())} links "
               f"({len(docs.rejected)} pages skipped)")
    with ExitStack() as stack:
        local = None
        if cfg.closed_book_llm is None and cfg.closed_book_local:
            from core.llm import LLMConfig
            from core.llm_server import serve
            from core.local_lm import obtain_smollm2

            server = serve(obtain_smollm2(cfg.data_dir, log=typer.echo), "127.0.0.1", 0, name="smollm2", threads=1)
            stack.callback(server.shutdown)
            # one request at a time, and time enough for it on a busy CPU
            local = LLMConfig(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="smollm2",
                              concurrency=1, timeout_s=600, cache_dir=str(Path(cfg.data_dir) / "llm_cache"))
            typer.echo(f"closed-book check: SmolLM2-135M served on {local.base_url}, "
                       f"{cfg.closed_book_k} samples per question")
        res = Generator(docs, cfg, closed_book_llm=local).generate(n, log=typer.echo)
    write_jsonl_atomic(out, res.tasks)
    stats = {"tasks": len(res.tasks), "candidates": res.attempts, "rejects": dict(res.rejects.most_common()),
             "paraphrased": res.paraphrased, "corpus_docs": len(docs), "skipped_pages": len(docs.rejected)}
    atomic_write_text(Path(f"{out}.stats.json"), json.dumps(stats, indent=1))
    typer.echo(f"{len(res.tasks)} tasks from {res.attempts} candidates -> {out}")
    for reason, count in res.rejects.most_common():
        typer.echo(f"  rejected {reason}: {count}")
    if len(res.tasks) < n:
        typer.echo(f"warning: only {len(res.tasks)} of {n} tasks passed the checks", err=True)


@app.command()
@user_errors
def grade(
    tasks: Path = typer.Option(..., help="tasks JSONL written by `generate`"),
    responses: Path = typer.Option(..., help='JSONL of {"id"?, "response"}: by id, or one per task in order'),
) -> None:
    """Score each response 1/0 (normalised exact match against the answer or an alias); last line = mean."""
    from synth.search.grade import grade_files

    graded = grade_files(tasks, responses)
    by_hops: dict[int, list[float]] = {}
    for t, s in graded:
        by_hops.setdefault(int(t.get("hop_count", 0)), []).append(s)
    for h, scores in sorted(by_hops.items()):
        typer.echo(f"hops={h}: {sum(scores) / len(scores):.4f} (n={len(scores)})")
    mean = sum(s for _, s in graded) / max(1, len(graded))
    typer.echo(f"mean score over {len(graded)} tasks:")
    typer.echo(f"{mean:.6f}")


@app.command()
@user_errors
def solve(
    tasks: Path = typer.Option(..., help="tasks JSONL"),
    corpus: Path = typer.Option(..., help="the corpus the tasks were generated from"),
    out: Path = typer.Option(..., help="responses JSONL ({id, response})"),
    depth: int = typer.Option(10, min=1, help="BM25 results the bm25 solver looks at"),
    solver: str = typer.Option("dense", help="dense: embedding retrieval + link following, independent of the "
                                             "generator's checks (the headline); bm25: the tool solver that "
                                             "decided which tasks to keep (1.0 by construction)"),
) -> None:
    """Answer every task with a retrieval solver (a baseline for `grade`)."""
    from synth.search.corpus import load_corpus

    if solver not in ("dense", "bm25"):
        raise UserError(f"--solver: dense or bm25, not {solver!r}")
    docs = load_corpus(corpus)
    rows = read_jsonl(tasks, "tasks")
    if solver == "bm25":
        from synth.search.bm25 import BM25
        from synth.search.solvers import tool_solve

        index = BM25(docs)
        answer = lambda q: tool_solve(q, docs, index, depth)  # noqa: E731
    else:
        from synth.search.dense_solver import DenseSolver

        answer = DenseSolver(docs).solve
    write_jsonl_atomic(out, ({"id": t.get("id"), "response": answer(t["question"]) or ""} for t in rows))
    typer.echo(f"{len(rows)} {solver} responses -> {out}")


if __name__ == "__main__":
    app()
