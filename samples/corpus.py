"""The real sample corpus (``python -m samples corpus``), obtained at run time from Debian
packages and cached in the user cache (``core.cache``) where jobs read it (``core.cached_samples``).

* Web-like HTML: the ~530 pages of the Python 3.11 documentation (``python3.11-doc``):
  real prose wrapped in navigation boilerplate, a good stand-in for crawled pages.
* Books: public-domain novels shipped as R data — 4 Gutenberg novels in
  ``r-cran-tidytext`` (``extdata/books.rda``) and Jane Austen's 6 novels in
  ``r-cran-janeaustenr`` (an R lazy-load database), read with the ``rdata`` package.

Packages are fetched with ``apt-get download`` (the machine's own apt sources and mirror)
and unpacked with ``dpkg-deb -x``; nothing is installed system-wide. A ``.deb`` placed in the
cache's ``debs/`` by hand is used as is, for machines without apt access.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import warnings
import zlib
from pathlib import Path

from core.cache import cache_dir
from core.cached_samples import CORPUS_BOOKS, SampleConfig, SampleCorpus, sample_corpus
from core.errors import UserError
from core.io import write_jsonl_atomic

PACKAGES = {
    "python3.11-doc": "HTML documentation pages (the web-like part of the sample)",
    "r-cran-tidytext": "4 Gutenberg novels (extdata/books.rda)",
    "r-cran-janeaustenr": "Jane Austen's 6 novels",
}
TIDYTEXT_BOOKS = "usr/lib/R/site-library/tidytext/extdata/books.rda"
AUSTEN_DATA = "usr/lib/R/site-library/janeaustenr/data"
AUSTEN_TITLES = {
    "emma": "Emma",
    "mansfieldpark": "Mansfield Park",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
    "prideprejudice": "Pride and Prejudice",
    "sensesensibility": "Sense and Sensibility",
}


class SampleError(UserError):
    pass


def _how_to_provide(pkg: str, debs: Path) -> str:
    return (
        f"could not obtain Debian package {pkg!r} ({PACKAGES[pkg]}). Provide it by hand: on any "
        f"Debian 12 machine run `apt-get download {pkg}` and copy the .deb into {debs}/"
    )


def _apt_download(pkg: str, debs: Path, log) -> None:
    def attempt() -> subprocess.CompletedProcess:
        return subprocess.run(["apt-get", "download", pkg], cwd=debs, capture_output=True, text=True)

    try:
        res = attempt()
        if res.returncode != 0 and os.geteuid() == 0:
            # stale or missing package lists on a fresh machine: refresh once and retry
            log(f"apt-get download {pkg} failed; running apt-get update and retrying")
            subprocess.run(["apt-get", "update"], capture_output=True, text=True)
            res = attempt()
    except FileNotFoundError:
        raise SampleError(_how_to_provide(pkg, debs) + " (apt-get is not available here)") from None
    if res.returncode != 0:
        raise SampleError(_how_to_provide(pkg, debs) + f"\napt-get said: {res.stderr.strip()[-400:]}")


def fetch_package(pkg: str, data_dir: Path, log=print) -> Path:
    """Return the directory where ``pkg`` is unpacked, downloading/unpacking if needed."""
    debs = data_dir / "debs"
    root = debs / "root" / pkg
    done = root / ".unpacked"
    if done.is_file():
        return root
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{pkg}_*.deb"))
    if not found:
        log(f"downloading {pkg} with apt-get")
        _apt_download(pkg, debs, log)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            raise SampleError(_how_to_provide(pkg, debs))
    root.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["dpkg-deb", "-x", str(found[-1]), str(root)], capture_output=True, text=True)
    if res.returncode != 0:
        raise SampleError(f"dpkg-deb could not unpack {found[-1]}: {res.stderr.strip()}")
    done.write_text(found[-1].name)
    return root


def _clean_lines(lines) -> str:
    text = "\n".join("" if x is None else str(x) for x in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def read_tidytext_books(path: Path) -> list[dict]:
    import rdata

    with warnings.catch_warnings():  # rdata warns about R classes it maps to plain data frames
        warnings.simplefilter("ignore")
        frame = rdata.read_rda(str(path))["books"]
    out = []
    for (gid, title), group in frame.groupby(["gutenberg_id", "title"], sort=True):
        slug = re.sub(r"[^a-z0-9]+", "-", str(title).lower()).strip("-")
        out.append(
            {
                "id": f"books/gutenberg-{int(gid)}-{slug}",
                "text": _clean_lines(group["text"].tolist()),
                "title": str(title),
                "gutenberg_id": int(gid),
                "origin": "r-cran-tidytext",
            }
        )
    return out


def read_austen_books(data_dir: Path) -> list[dict]:
    """Read janeaustenr's lazy-load DB: a gzipped index of (offset, length) per variable and
    a blob file whose entries are zlib streams after a 4-byte length header."""
    import rdata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index = rdata.conversion.convert(
            rdata.parser.parse_data(gzip.decompress((data_dir / "Rdata.rdx").read_bytes()))
        )
        blob = (data_dir / "Rdata.rdb").read_bytes()
        out = []
        for name, (offset, length) in sorted(index["variables"].items()):
            name = str(name)
            raw = zlib.decompress(blob[int(offset) + 4 : int(offset) + int(length)])
            lines = rdata.conversion.convert(rdata.parser.parse_data(raw))
            out.append(
                {
                    "id": f"books/austen-{name}",
                    "text": _clean_lines(list(lines)),
                    "title": AUSTEN_TITLES.get(name, name),
                    "author": "Jane Austen",
                    "origin": "r-cran-janeaustenr",
                }
            )
    return out


def obtain_sample(cfg: SampleConfig, log=print) -> SampleCorpus:
    """Fetch what is missing into the cache, then read it back where jobs will."""
    data_dir = cache_dir(cfg.data_dir)
    fetch_package("python3.11-doc", data_dir, log)
    if cfg.include_books:
        books_path = data_dir / CORPUS_BOOKS
        if not books_path.is_file():
            tidy = fetch_package("r-cran-tidytext", data_dir, log) / TIDYTEXT_BOOKS
            austen = fetch_package("r-cran-janeaustenr", data_dir, log) / AUSTEN_DATA
            books = read_tidytext_books(tidy) + read_austen_books(austen)
            write_jsonl_atomic(books_path, books)
            log(f"wrote {len(books)} books to {books_path}")
    return sample_corpus(cfg)
