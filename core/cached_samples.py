"""Where ``python -m samples`` leaves the sample data in the cache, and reading it back.

The builders (``samples/``, outside the product) write these paths; jobs read them here and never
build samples themselves. A missing sample is one error naming the command that puts it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.cache import RULE, cache_dir, cache_field
from core.config import StrictModel
from core.errors import InputError

# relative to the cache directory
CORPUS_HTML = "debs/root/python3.11-doc/usr/share/doc/python3.11/html"  # the unpacked Debian package
CORPUS_BOOKS = "sample/books.jsonl"
SWE_API = "github3/cassettes"
SWE_EVENTS = "swe/events"
SWE_REPOS = "swe/repos"
POST_TRAIN = "post_train"  # real SFT data for post-training a real model (samples/post_train.py)


class SampleConfig(StrictModel):
    data_dir: str = cache_field()  # the cache holding the sample (default: the user cache)
    # bound the HTML part (first N pages in path order); None = all ~530 pages
    max_html_pages: int | None = None
    include_books: bool = True


@dataclass
class SampleCorpus:
    html_dir: Path
    books_jsonl: Path | None
    max_html_pages: int | None


def missing(what: str, path: Path, command: str) -> InputError:
    return InputError(f"{what} not found at {path}: run `python -m samples {command}` to put it in the cache "
                      f"({RULE}), or point the job at your own copy")


def sample_corpus(cfg: SampleConfig) -> SampleCorpus:
    """The sample corpus (Python docs pages + novels) as ``python -m samples corpus`` cached it."""
    root = cache_dir(cfg.data_dir)
    html = root / CORPUS_HTML
    if not html.is_dir():
        raise missing("the sample corpus's HTML pages", html, "corpus")
    books = root / CORPUS_BOOKS if cfg.include_books else None
    if books is not None and not books.is_file():
        raise missing("the sample corpus's novels", books, "corpus")
    return SampleCorpus(html_dir=html, books_jsonl=books, max_html_pages=cfg.max_html_pages)


def swe_mine_sample(data_dir: str | Path | None = None) -> dict[str, Path]:
    """The swe-mine sample (recorded API responses, hourly events, git clones) by input kind."""
    root = cache_dir(data_dir)
    paths = {"api": root / SWE_API, "events": root / SWE_EVENTS, "repos": root / SWE_REPOS}
    for kind, path in paths.items():
        if not path.is_dir() or not any(path.iterdir()):
            raise missing(f"the swe-mine sample's {kind}", path, "swe-mine")
    return paths
