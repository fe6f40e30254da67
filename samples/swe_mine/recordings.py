"""The recorded GitHub data of the swe-mine sample: github3.py's cassettes (real API responses,
fetched once with ``pip download``) and the GH-Archive-style hourly event files built from them.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError

SDIST_GLOB = "github3.py-*.tar.gz"


def obtain_cassettes(data_dir: Path) -> Path:
    """``data_dir/github3/cassettes`` with the recorded API responses (downloaded once).

    The sdist's example API objects (``tests/unit/json``, several API versions and GitHub
    Enterprise) are extracted beside them, into ``data_dir/github3/unit_json``."""
    target = data_dir / "github3"
    cassettes = target / "cassettes"
    if cassettes.is_dir() and any(cassettes.glob("*.json")) and (target / "unit_json").is_dir():
        return cassettes
    target.mkdir(parents=True, exist_ok=True)
    if not list(target.glob(SDIST_GLOB)):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "github3.py",
            "-d",
            str(target),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise InputError(
                f"could not download the github3.py sdist into {target}: {proc.stderr.strip()[-300:]}"
            )
    sdist = sorted(target.glob(SDIST_GLOB))[-1]
    for sub, marker in (("cassettes", "/tests/cassettes/"), ("unit_json", "/tests/unit/json/")):
        final = target / sub
        if final.is_dir():
            continue
        tmp = target / f".{sub}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                if marker in member.name and member.isfile() and "/" not in member.name.split(marker, 1)[1]:
                    (tmp / Path(member.name).name).write_bytes(tar.extractfile(member).read())
        tmp.rename(final)
    return cassettes


def cassette_bodies(path: Path) -> Iterator[tuple[str, Any]]:
    """(request URI, decoded JSON body) of every interaction of a cassette."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for inter in doc.get("http_interactions", []):
        body = inter["response"].get("body") or {}
        raw = (
            base64.b64decode(body["base64_string"])
            if body.get("base64_string")
            else (body.get("string") or "").encode()
        )
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        try:
            yield inter["request"]["uri"], json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue


def recorded_events(cassettes: Path) -> list[dict[str, Any]]:
    events: dict[str, dict[str, Any]] = {}
    for path in sorted(cassettes.glob("*.json")):
        for _, body in cassette_bodies(path):
            for item in body if isinstance(body, list) else [body]:
                if isinstance(item, dict) and "type" in item and "payload" in item and "id" in item:
                    events[str(item["id"])] = item
    return sorted(events.values(), key=lambda e: (e.get("created_at") or "", str(e["id"])))


def hour_file(created_at: str) -> str:
    """GH Archive's file name for an event time: ``2018-01-26-9.json.gz`` (hour unpadded)."""
    return f"{created_at[:10]}-{int(created_at[11:13])}.json.gz"


def write_hourly_events(events: list[dict[str, Any]], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    by_hour: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_hour.setdefault(hour_file(e["created_at"]), []).append(e)
    paths = []
    for name, evs in sorted(by_hour.items()):
        path = out / name
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            for e in evs:
                fh.write(json.dumps(e) + "\n")
        paths.append(path)
    return paths
