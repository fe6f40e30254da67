"""A real-volume web input (``python -m samples web-volume``): the HTML documentation that nine
Debian packages ship — Python, PostgreSQL, Django, Sphinx, Git, Node.js, Boost, Qt 5 and
libstdc++ — about 12,900 distinct pages, written into WARC files as a crawl would have archived
them, so the web job can be run and measured on volume that is neither synthetic nor repeated.

Pages are real and distinct: every ``.html``/``.htm`` file under each package's HTML tree (links
left out: they repeat a file), de-duplicated by the SHA-256 of their bytes. The mix is what a
crawl of documentation sites holds: hand-written manuals (PostgreSQL, Python, Django, Git),
release notes, and machine-generated API reference (Doxygen for libstdc++ and Boost, QDoc for Qt).

Each page becomes one WARC/1.1 ``response`` record (warcio's writer, gzip per record, digests
computed by warcio): the URL the page has on its project's site, an HTTP/1.1 200 with Date,
Server, Content-Type with the charset the page declares, Content-Length and Last-Modified (the
file's time in the package). As Common Crawl does, a body over 1 MiB is cut there and the record
says ``WARC-Truncated: length`` (the HTTP Content-Length keeps the full size). Each file opens
with a ``warcinfo`` record. Pages are ordered by a hash of their URL, so every file mixes the
sites as a crawl's files do, and split evenly over ``files`` files (8 by default: one per task of
the web job's default ``local.tasks``). Everything is derived from the packages' bytes — record
ids are UUIDv5 of the URL, dates count seconds from a fixed crawl start — so a rebuild from the
same packages gives the same files byte for byte.

Packages come through ``samples.corpus.fetch_package`` (``apt-get download`` into the cache's
``debs/``). The output is ``DATA_DIR/web-volume/``: the ``.warc.gz`` files and ``manifest.json``
(pages, bytes, duplicates and truncations per package, sha256 per file), written last: a folder
without it is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from io import BytesIO
from pathlib import Path

from core.cache import cache_dir
from core.io import atomic_write_text
from samples.corpus import fetch_package

FOLDER = "web-volume"
MANIFEST = "manifest.json"
PREFIX = "web-volume"
DEFAULT_FILES = 8
MAX_PAYLOAD = 1 << 20  # Common Crawl's payload limit
CRAWL_START = datetime(2026, 11, 2, tzinfo=UTC)
HTML_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class Site:
    package: str
    root: str  # the HTML tree inside the unpacked package
    base_url: str  # where that tree is served on the project's site
    server: str  # the Server header such a site sends
    pretty: bool = False  # URLs without ".html", ending in "/" (Django's)


SITES = (
    Site("python3.11-doc", "usr/share/doc/python3.11/html", "https://docs.python.org/3.11/", "nginx"),
    Site("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html", "https://www.postgresql.org/docs/15/", "nginx"),
    Site("python-django-doc", "usr/share/doc/python-django-doc/html", "https://docs.djangoproject.com/en/3.2/",
         "nginx", pretty=True),
    Site("sphinx-doc", "usr/share/doc/sphinx-doc/html", "https://www.sphinx-doc.org/en/5.x/", "cloudflare"),
    Site("git-doc", "usr/share/doc/git-doc", "https://git-scm.com/docs/", "cloudflare"),
    Site("nodejs-doc", "usr/share/doc/nodejs/api", "https://nodejs.org/docs/latest-v18.x/api/", "cloudflare"),
    Site("libboost1.74-doc", "usr/share/doc/libboost1.74-doc", "https://www.boost.org/doc/libs/1_74_0/", "Apache"),
    Site("qtbase5-doc-html", "usr/share/qt5/doc", "https://doc.qt.io/qt-5/", "nginx"),
    Site("libstdc++-12-doc", "usr/share/doc/gcc-12-base/libstdc++",
         "https://gcc.gnu.org/onlinedocs/gcc-12.2.0/libstdc++/", "Apache"),
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    site: Site
    path: Path  # the file
    rel: str  # its path under the site's root
    url: str
    sha256: str
    size: int


@dataclass
class WebVolume:
    folder: Path
    warcs: list[Path]
    manifest: dict


def page_url(site: Site, rel: str) -> str:
    if site.pretty:
        rel = re.sub(r"(^|/)index\.html?$", r"\1", rel)
        rel = re.sub(r"\.html?$", "/", rel)
    return site.base_url + rel


def page_charset(body: bytes) -> str:
    """The charset a server would send for the page: the one it declares, else UTF-8 when it
    decodes as UTF-8, else windows-1252 (what browsers assume)."""
    m = _META_CHARSET.search(body[:4096])
    if m:
        return m.group(1).decode("ascii").lower()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "windows-1252"
    return "utf-8"


def site_pages(site: Site, root: Path, seen: set[str], limit: int | None = None) -> tuple[list[Page], int]:
    """The site's distinct pages in path order (at most ``limit``), and how many files were
    byte-for-byte copies of a page already taken (here or from an earlier site)."""
    tree = root / site.root
    pages, dups = [], 0
    for path in sorted(p for p in tree.rglob("*") if p.suffix.lower() in HTML_SUFFIXES):
        if path.is_symlink() or not path.is_file():
            continue
        if limit is not None and len(pages) >= limit:
            break
        body = path.read_bytes()
        digest = hashlib.sha256(body).hexdigest()
        if digest in seen:
            dups += 1
            continue
        seen.add(digest)
        rel = path.relative_to(tree).as_posix()
        pages.append(Page(site, path, rel, page_url(site, rel), digest, len(body)))
    return pages, dups


def crawl_order(pages: list[Page]) -> list[Page]:
    """Sites interleaved as in a crawl's files: ordered by a hash of the URL (deterministic)."""
    return sorted(pages, key=lambda p: (hashlib.sha1(p.url.encode()).hexdigest(), p.url))


def split_evenly(items: list, parts: int) -> list[list]:
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _record_id(name: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, name)}>"


def _warc_date(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def response_record(writer, page: Page, at: datetime, warcinfo_id: str):
    """The page as a WARC ``response``: the HTTP/1.1 answer its site would give, digests by warcio."""
    from warcio.statusandheaders import StatusAndHeaders

    body = page.path.read_bytes()
    modified = datetime.fromtimestamp(int(page.path.stat().st_mtime), UTC)
    http = StatusAndHeaders("200 OK", [
        ("Date", format_datetime(at, usegmt=True)),
        ("Server", page.site.server),
        ("Content-Type", f"text/html; charset={page_charset(body)}"),
        ("Content-Length", str(len(body))),
        ("Last-Modified", format_datetime(modified, usegmt=True)),
        ("Connection", "close"),
    ], protocol="HTTP/1.1")
    stored = body[:MAX_PAYLOAD]
    headers = {"WARC-Record-ID": _record_id(page.url), "WARC-Date": _warc_date(at), "WARC-Warcinfo-ID": warcinfo_id}
    if len(stored) < len(body):
        headers["WARC-Truncated"] = "length"
    return writer.create_warc_record(page.url, "response", payload=BytesIO(stored), length=len(stored),
                                     http_headers=http, warc_headers_dict=headers)


def warcinfo_record(writer, name: str, at: datetime, packages: list[str]):
    fields = {"software": "glm5-recipe samples.web_volume (warcio)", "format": "WARC File Format 1.1",
              "isPartOf": PREFIX, "description": "HTML documentation of Debian packages: " + ", ".join(packages)}
    payload = "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode()
    headers = {"WARC-Record-ID": _record_id(name), "WARC-Date": _warc_date(at), "WARC-Filename": name,
               "Content-Type": "application/warc-fields"}
    return writer.create_warc_record("", "warcinfo", payload=BytesIO(payload), length=len(payload),
                                     warc_headers_dict=headers)


def write_warc(path: Path, pages: list[Page], first_second: int, packages: list[str]) -> dict:
    """One ``.warc.gz``: a warcinfo record, then a response per page (written to a temporary
    name, renamed when whole)."""
    from warcio.warcwriter import WARCWriter

    tmp = path.with_name(path.name + ".tmp")
    start = CRAWL_START + timedelta(seconds=first_second)
    with open(tmp, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        info = warcinfo_record(writer, path.name, start, packages)
        writer.write_record(info)
        info_id = info.rec_headers.get_header("WARC-Record-ID")
        for i, page in enumerate(pages):
            writer.write_record(response_record(writer, page, start + timedelta(seconds=i), info_id))
    tmp.rename(path)
    data = path.read_bytes()
    return {"name": path.name, "records": len(pages) + 1, "responses": len(pages), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def build_web_volume(data_dir: str | Path | None = None, dest: str | Path | None = None,
                     sites: tuple[Site, ...] = SITES, max_pages: int | None = None, files: int = DEFAULT_FILES,
                     log=print) -> WebVolume:
    """Fetch the packages, gather their distinct pages (at most ``max_pages`` per site) and write
    them into ``files`` WARC files under ``dest`` (default ``DATA_DIR/web-volume``). A folder whose
    manifest was built with the same settings is returned as is."""
    root = cache_dir(data_dir)
    folder = Path(dest) if dest is not None else root / FOLDER
    params = {"sites": [s.package for s in sites], "max_pages": max_pages, "files": files,
              "max_payload": MAX_PAYLOAD}
    done = folder / MANIFEST
    if done.is_file():
        manifest = json.loads(done.read_text())
        if manifest.get("params") == params:
            return WebVolume(folder, [folder / f["name"] for f in manifest["files"]], manifest)
    seen: set[str] = set()
    pages: list[Page] = []
    packages: dict[str, dict] = {}
    for site in sites:
        unpacked = fetch_package(site.package, root, log)
        found, dups = site_pages(site, unpacked, seen, max_pages)
        pages += found
        html_bytes = sum(p.size for p in found)
        packages[site.package] = {
            "deb": (unpacked / ".unpacked").read_text().strip(), "url": site.base_url, "pages": len(found),
            "duplicates_dropped": dups, "html_bytes": html_bytes,
            "truncated": sum(p.size > MAX_PAYLOAD for p in found)}
        log(f"{site.package}: {len(found)} distinct pages, {html_bytes / 1e6:.1f} MB ({dups} duplicates dropped)")
    folder.mkdir(parents=True, exist_ok=True)
    done.unlink(missing_ok=True)
    for old in folder.glob(f"{PREFIX}-*.warc.gz"):
        old.unlink()
    names = [s.package for s in sites]
    written, second = [], 0
    for i, chunk in enumerate(split_evenly(crawl_order(pages), files)):
        info = write_warc(folder / f"{PREFIX}-{i:05d}.warc.gz", chunk, second, names)
        second += len(chunk)
        written.append(info)
        log(f"wrote {info['name']}: {info['records']} records, {info['bytes'] / 1e6:.1f} MB")
    manifest = {"pages": len(pages), "html_bytes": sum(p.size for p in pages),
                "warc_bytes": sum(f["bytes"] for f in written), "packages": packages, "files": written,
                "params": params}
    atomic_write_text(done, json.dumps(manifest, indent=2) + "\n")
    return WebVolume(folder, [folder / f["name"] for f in written], manifest)
