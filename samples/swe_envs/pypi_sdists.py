"""Source releases of real Python projects from the machine's package index, as git repositories.

An sdist is the project's tree at a release, with its tests where the project shipped them
(requests 1.x ships ``test_requests.py``): old code no one here wrote, for environments of the
Python 2 era. ``pip download`` cannot fetch these: it prepares an sdist's metadata by running its
setup.py on this interpreter, and requests 1.1's setup.py imports ``collections.MutableMapping``
(gone in 3.10). So the index's simple API (PEP 691 JSON) is read directly, with the index and CA
bundle the host's pip uses (``swe_envs.registry``), and the file's sha256 from the index checked.
The upload time the index records is the release's date (the era an instance's created_at gives).
"""

from __future__ import annotations

import hashlib
import json
import ssl
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError
from swe_envs.registry import find_ca_bundle, pip_config

_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass
class Sdist:
    name: str
    version: str
    path: Path
    uploaded: str  # ISO date-time the index records for the file


def _indexes() -> list[str]:
    cfg = pip_config()
    urls = [cfg.get("index-url", "")] + cfg.get("extra-index-url", "").split()
    urls = [u for u in urls if u.startswith(("http://", "https://"))]
    if not cfg.get("index-url"):
        # pip's own default index, never written here; asked in a child process because importing
        # pip's internals loads the standard library's distutils, after which importing setuptools
        # in this process fails (its _distutils_hack asserts: megatron imports it via torch)
        out = subprocess.run([sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and out.stdout.strip():
            urls.insert(0, out.stdout.strip())
    return urls


def _get(url: str, accept: str | None = None) -> bytes:
    ctx = ssl.create_default_context(cafile=find_ca_bundle(None))
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, context=ctx, timeout=120) as resp:
        return resp.read()


def fetch_sdist(name: str, version: str, cache: Path) -> Sdist:
    """``name-version.tar.gz`` from the first index that has it (cached with its upload time)."""
    cache.mkdir(parents=True, exist_ok=True)
    meta = cache / f"{name}-{version}.json"
    if meta.is_file():
        m = json.loads(meta.read_text())
        return Sdist(name, version, cache / m["filename"], m["uploaded"])
    errors = []
    for index in _indexes():
        try:
            listing = json.loads(_get(f"{index.rstrip('/')}/{name}/", _JSON))
        except Exception as err:  # the next index, then a clear error
            errors.append(f"{type(err).__name__}: {err}")
            continue
        for f in listing.get("files", []):
            if f["filename"].lower() in (f"{name}-{version}.tar.gz".lower(),):
                data = _get(urllib.parse.urljoin(f"{index.rstrip('/')}/{name}/", f["url"]))
                want = (f.get("hashes") or {}).get("sha256")
                if want and hashlib.sha256(data).hexdigest() != want:
                    raise UserError(f"{f['filename']}: sha256 differs from the index's")
                (cache / f["filename"]).write_bytes(data)
                meta.write_text(json.dumps({"filename": f["filename"], "uploaded": f.get("upload-time", "")}))
                return Sdist(name, version, cache / f["filename"], f.get("upload-time", ""))
        errors.append(f"no {name}-{version}.tar.gz in its listing")
    raise UserError(f"sdist {name}=={version} not found: {'; '.join(errors) or 'no index configured'}")


def unpack(sdist: Sdist, dest: Path) -> Path:
    """The sdist's tree (its one top folder), files owned by whoever unpacks it."""
    out = dest / f"{sdist.name}-{sdist.version}"
    if not out.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist.path) as tar:
            tar.extractall(dest / ".unpack", filter="data")  # no absolute paths, links out, or owners
        (top,) = (dest / ".unpack").iterdir()
        top.rename(out)
        (dest / ".unpack").rmdir()
    return out
