"""Real web archives no one here wrote: the WARC/ARC test files that web-archiving projects ship
in their source releases on the package index, cached under ``DATA_DIR/web-archives``.

- warcio 1.5.3's ``test/data`` (later releases stopped shipping it): WARC, gzipped per record
  and as one stream, ARC, a truncated record with a failing digest, a malformed ARC;
- pywb 2.10.0's ``sample_archive/warcs``: a real crawl of iana.org (343 records, 48 HTTP
  responses) and captures by wget, wpull and Webrecorder, one with a payload that does not
  match its digest.

The sdists are fetched with the project's sdist fetcher (``samples.swe_envs.pypi_sdists``:
the host's pip index, sha256 checked). Identical files shipped by both are kept once.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

from samples.swe_envs.pypi_sdists import fetch_sdist

# (project, version, folder inside the sdist that holds the archives)
RELEASES = (("warcio", "1.5.3", "test/data"), ("pywb", "2.10.0", "sample_archive/warcs"))
ARCHIVE_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz", ".warc.gz.bad")


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def obtain_web_archives(data_dir: str | Path, log=print) -> list[Path]:
    """The archive files (``<project>-<name>``), fetched once; sorted by name."""
    dest = Path(data_dir) / "web-archives"
    marker = dest / ".complete"
    if not marker.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        seen: set[str] = set()
        for name, version, folder in RELEASES:
            sdist = fetch_sdist(name, version, Path(data_dir) / "pypi-sdists" / "sdists")
            with tarfile.open(sdist.path) as tar:
                for member in sorted(tar.getmembers(), key=lambda m: m.name):
                    inner = member.name.split("/", 1)[-1]
                    if not (member.isfile() and inner.startswith(folder + "/") and is_archive(member.name)):
                        continue
                    data = tar.extractfile(member).read()
                    digest = hashlib.sha256(data).hexdigest()
                    if digest in seen:
                        continue
                    seen.add(digest)
                    out = dest / f"{name}-{Path(member.name).name}"
                    tmp = out.with_name(out.name + ".tmp")
                    tmp.write_bytes(data)
                    tmp.rename(out)
            log(f"web archives from {name} {version}: {dest}")
        marker.write_text("\n".join(sorted(p.name for p in dest.iterdir() if is_archive(p.name))) + "\n")
    return sorted(dest / n for n in marker.read_text().split())
