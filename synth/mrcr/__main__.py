"""``python -m synth.mrcr``: generate MRCR-like samples from real text, and grade responses.

python -m synth.mrcr generate --n 30 --needles 2,4,8 --out mrcr.jsonl
python -m synth.mrcr grade --samples mrcr.jsonl --responses responses.jsonl
python -m synth.mrcr oracle --samples mrcr.jsonl --out responses.jsonl   # true answers
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import typer

from core.cli import user_errors
from core.errors import UserError
from core.io import read_jsonl, write_jsonl_atomic

app = typer.Typer(add_completion=False, no_args_is_help=True, help="MRCR-like long-context data.")

_ROOT = Path(__file__).resolve().parents[2]


def _default_documents() -> list[Path]:
    """The demo's kept documents if `make demo` ran (here, else in the checkout), else the sample
    novels in the cache (`python -m samples corpus`)."""
    from core.cache import cache_dir
    from core.cached_samples import CORPUS_BOOKS

    return [Path("out/demo/documents"), _ROOT / "out/demo/documents", cache_dir() / CORPUS_BOOKS]


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--{what} must be comma-separated integers, got {text!r}") from None


def _bins(text: str) -> list[tuple[int, int]]:
    try:
        return [tuple(int(x) for x in part.split("-")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"--bins must look like 4000-8000,8000-16000, got {text!r}") from None


@app.command("generate")
@user_errors
def generate_cmd(
    n: int = typer.Option(..., "--n", min=1, help="number of samples"),
    out: Path = typer.Option(..., help="output JSONL (one sample per line)"),
    needles: str = typer.Option("2,4,8", help="needle counts, cycled through"),
    variants: str = typer.Option("kth_from_start,kth_from_end,multi_ask", help="variants, cycled through"),
    bins: str = typer.Option("4000-8000,8000-16000,16000-32000", help="prompt length bins in characters"),
    documents: list[Path] = typer.Option(
        None,
        help="documents dataset (Parquet dir/file or JSONL); default: out/demo/documents, else the cached sample novels",
    ),
    seed: int = typer.Option(0),
) -> None:
    """Write N multi-turn samples with identical-request needles among real-text distractors."""
    from core.config import validate_config
    from synth.mrcr.generate import MrcrConfig, generate
    from synth.mrcr.passages import passage_pool

    cfg = validate_config(
        MrcrConfig,
        {
            "needles": _ints(needles, "needles"),
            "variants": [v.strip() for v in variants.split(",")],
            "bins": _bins(bins),
            "seed": seed,
        },
        source="options",
    )
    if not documents:
        candidates = _default_documents()
        found = next((p for p in candidates if p.exists()), None)
        if found is None:
            raise UserError(f"no --documents given and neither out/demo/documents nor {candidates[-1]} exists; "
                            "run `make demo` or `python -m samples corpus`")
        documents = [found]
    pool = passage_pool(documents, cfg.passages)
    samples = generate(pool, n, cfg)
    write_jsonl_atomic(out, samples)
    typer.echo(
        f"{len(samples)} samples from {sum(len(v) for v in pool.values())} paragraphs of {len(pool)} documents -> {out}"
    )


@app.command("grade")
@user_errors
def grade_cmd(
    samples: Path = typer.Option(..., help="samples JSONL written by `generate`"),
    responses: Path = typer.Option(..., help='JSONL of {"response": "..."}, one per sample, same order'),
) -> None:
    """Score responses (0 without the prefix, else SequenceMatcher ratio); last line = mean."""
    from synth.mrcr.grade import grade_files

    graded = grade_files(samples, responses)
    groups: dict[tuple, list[float]] = defaultdict(list)
    for s, score in graded:
        groups[(s.get("variant", "?"), s.get("n_needles", "?"))].append(score)
    for (variant, n), scores in sorted(groups.items(), key=str):
        typer.echo(f"{variant} needles={n}: {sum(scores) / len(scores):.4f} (n={len(scores)})")
    mean = sum(score for _, score in graded) / max(1, len(graded))
    typer.echo(f"mean score over {len(graded)} samples:")
    typer.echo(f"{mean:.6f}")


@app.command("oracle")
@user_errors
def oracle_cmd(
    samples: Path = typer.Option(..., help="samples JSONL"),
    out: Path = typer.Option(..., help="responses JSONL to write (the true answers)"),
) -> None:
    """Write the true answers as responses (a grader check: they score 1.0)."""

    rows = read_jsonl(samples, "samples")
    write_jsonl_atomic(out, ({"response": s["answer"]} for s in rows))
    typer.echo(f"{len(rows)} responses -> {out}")


if __name__ == "__main__":
    app()
