"""Man pages of Debian binary packages as a document corpus (JSONL), for closed-loop task synthesis
and deep-search tasks.

Each package is fetched with apt's own client (``apt-get download``: the machine's configured
mirror and trust, the ``.deb`` cached under ``cache/``), its ``usr/share/man/man*/`` pages are read
straight out of the package's data archive (nothing is installed) and rendered to text
(``roff.render``). A page's ``SEE ALSO`` references become its links to the other pages of the
corpus, so the result has the link graph ``synth.search`` builds chains on.

Rows: ``{"id": "sed/1/sed", "title": "sed(1)", "text" (its first line names the package), "links",
"package", "name", "section"}``. Every page not kept is counted with its reason (an alias, a
translation, too little text, an unreadable file), and a package that could not be fetched names
apt's error.
"""

from __future__ import annotations

import gzip
import lzma
import re
import shutil
import subprocess
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from core.errors import UserError
from synth.manpages.roff import render

_PAGE = re.compile(r"^usr/share/man/man(?P<dir>[1-9n])/(?P<name>.+)\.(?P<section>[1-9n][a-z0-9]*)(?:\.gz|\.xz)?$")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")  # Debian policy's package names


@dataclass
class FetchReport:
    packages: dict[str, str] = field(default_factory=dict)  # package -> "ok" | why it was not fetched
    rejected: Counter = field(default_factory=Counter)  # reason -> pages
    kept: int = 0

    def as_dict(self) -> dict:
        return {"packages": self.packages, "pages_kept": self.kept, "pages_rejected": dict(self.rejected)}


def download(package: str, cache: Path) -> Path:
    """The package's .deb in ``cache`` (apt-get download when not cached); UserError naming apt's error."""
    if not _PACKAGE.match(package):
        raise UserError(f"not a Debian package name: {package!r}")
    cache.mkdir(parents=True, exist_ok=True)
    hits = sorted(cache.glob(f"{package}_*.deb"))
    if hits:
        return hits[-1]
    if shutil.which("apt-get") is None:
        raise UserError("apt-get not found: man pages are fetched from Debian packages with apt's client")
    r = subprocess.run(["apt-get", "download", "-q", package], cwd=cache, capture_output=True, text=True,
                       timeout=600)
    hits = sorted(cache.glob(f"{package}_*.deb"))
    if r.returncode != 0 or not hits:
        err = [x for x in r.stderr.splitlines() if x.startswith("E:")] or r.stderr.strip().splitlines()[-1:]
        raise UserError(f"{package}: apt-get download failed: {' '.join(err)[:300] or f'exit {r.returncode}'}")
    return hits[-1]


def _decompress(data: bytes, name: str) -> bytes:
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".xz"):
        return lzma.decompress(data)
    return data


def pages_of(deb: Path, report: FetchReport, package: str) -> list[dict]:
    """The English man pages inside one .deb, rendered; the rest counted in ``report.rejected``."""
    if shutil.which("dpkg-deb") is None:
        raise UserError("dpkg-deb not found: it reads the .deb's data archive")
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    rows = []
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                path = PurePosixPath(member.name.lstrip("./")).as_posix()
                if not path.startswith("usr/share/man/"):
                    continue
                m = _PAGE.match(path)
                if not m:
                    if member.isfile() and re.match(r"usr/share/man/[a-z]{2}", path):
                        report.rejected["translation (not English)"] += 1
                    continue
                if member.issym() or member.islnk():
                    report.rejected["alias (a link to another page)"] += 1
                    continue
                if not member.isfile():
                    continue
                raw = tar.extractfile(member).read()
                try:
                    source = _decompress(raw, path).decode("utf-8", errors="replace")
                except (OSError, EOFError, lzma.LZMAError) as err:
                    report.rejected[f"unreadable ({type(err).__name__})"] += 1
                    continue
                if source.lstrip().startswith(".so "):
                    report.rejected["alias (a link to another page)"] += 1
                    continue
                page = render(source)
                if len(page.text) < 200:
                    report.rejected["too little text"] += 1
                    continue
                name, section = m.group("name"), m.group("section")
                # the package is named in the text, not the title: a deep-search answer is the page's
                # title, and a task grounded in the page needs to know what to install
                rows.append({"id": f"{package}/{section}/{name}", "title": f"{name}({section})",
                             "text": f"Debian package: {package}\n\n{page.text}", "see_also": page.see_also,
                             "package": package, "name": name, "section": section})
    except tarfile.TarError as err:
        raise UserError(f"{deb.name}: not a readable package archive ({err})") from None
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        if proc.wait() != 0:
            raise UserError(f"{deb.name}: dpkg-deb failed: {err.strip()[:300]}")
    return rows


def link(rows: list[dict]) -> list[dict]:
    """Resolve each page's SEE ALSO (name, section) to pages of the corpus: its ``links``."""
    by_ref: dict[tuple[str, str], str] = {}
    for r in rows:
        by_ref.setdefault((r["name"], r["section"]), r["id"])
        by_ref.setdefault((r["name"], r["section"][:1]), r["id"])  # 3pm is also cited as 3
    out = []
    for r in rows:
        links = []
        for name, sec in r.pop("see_also"):
            target = by_ref.get((name, sec)) or by_ref.get((name, sec[:1]))
            if target and target != r["id"] and target not in links:
                links.append(target)
        out.append({**r, "links": links})
    return out


def fetch_manpages(packages: list[str], cache: Path, log=print) -> tuple[list[dict], FetchReport]:
    report = FetchReport()
    rows: list[dict] = []
    for pkg in packages:
        try:
            deb = download(pkg, cache)
            found = pages_of(deb, report, pkg)
        except UserError as err:  # one missing package is a counted failure, the others still come
            report.packages[pkg] = str(err)
            log(f"failed {err}")
            continue
        report.packages[pkg] = "ok" if found else "ok (no English man pages)"
        report.kept += len(found)
        rows += found
        log(f"{pkg}: {len(found)} pages")
    return link(sorted(rows, key=lambda r: r["id"])), report
