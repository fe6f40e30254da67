"""``python -m synth.manpages fetch``: man pages of Debian packages as a JSONL corpus.

python -m synth.manpages fetch --packages coreutils,sed,grep --out manpages.jsonl
The JSONL feeds ``python -m swe_envs terminal synthesize-docs --corpus`` (closed-loop tasks grounded
in a page) and ``python -m synth.search generate --corpus`` (SEE ALSO references are the links).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from core.cli import user_errors
from core.errors import UserError
from core.io import atomic_write_text, write_jsonl_atomic

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Man pages of Debian packages as documents.")

# everyday command-line tools: what terminal tasks are made of
DEFAULT_PACKAGES = "coreutils,sed,grep,gawk,findutils,diffutils,tar,gzip,jq,bc"


@app.command()
@user_errors
def fetch(
    packages: str = typer.Option(DEFAULT_PACKAGES, help="comma-separated Debian binary package names"),
    out: Path = typer.Option(None, help="JSONL documents (+ OUT.stats.json); default: manpages/manpages.jsonl "
                             "in the user cache"),
    cache: Path = typer.Option(None, help="where the downloaded .deb files are kept; default: manpages/debs in "
                               "the user cache"),
) -> None:
    """Download the packages with apt-get, render their English man pages, link pages by SEE ALSO."""
    from core.cache import cache_dir
    from synth.manpages.fetch import fetch_manpages

    out = out or cache_dir() / "manpages" / "manpages.jsonl"
    cache = cache or cache_dir() / "manpages" / "debs"

    names = [p.strip() for p in packages.split(",") if p.strip()]
    if not names:
        raise UserError("--packages names no package")
    rows, report = fetch_manpages(names, cache, log=typer.echo)
    if not rows:
        raise UserError(f"no man page from {', '.join(names)}: {json.dumps(report.packages)}")
    write_jsonl_atomic(out, rows)
    stats = report.as_dict() | {"documents": len(rows), "links": sum(len(r["links"]) for r in rows)}
    atomic_write_text(Path(f"{out}.stats.json"), json.dumps(stats, indent=1))
    typer.echo(f"{len(rows)} pages from {sum(v.startswith('ok') for v in report.packages.values())}/{len(names)} "
               f"packages, {stats['links']} links -> {out}")


@app.callback()
def _main() -> None:
    """Man pages of Debian packages as documents."""


if __name__ == "__main__":
    app()
