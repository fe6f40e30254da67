"""The miner's input units: every event file, API dump and git repository named by
``--events`` / ``--api`` / ``--repos``, each a path or an object-storage URL. Event files and
API dumps in object storage are listed here and streamed by the readers; repositories are
fetched first by the caller's ``fetch`` (git reads a repository's files by path).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.errors import InputError
from core.storage import is_url, url_files
from swe_envs.mining.git_history import discover_repos
from swe_envs.mining.stages import MineUnit

_EVENT_SUFFIXES = (".json.gz", ".json", ".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


def _event_file(name: str) -> bool:
    return name.lower().endswith(_EVENT_SUFFIXES) and not name.startswith(".")


def _files(raw: str, flag: str) -> list[tuple[str, str]]:
    """(path, path relative to ``raw``) of the event/API files ``raw`` names: itself, or the
    .json[.gz]/.jsonl[.gz] files under it; a directory or an object-storage prefix (streamed)."""
    if is_url(raw):
        listed = url_files(raw)  # a missing bucket or prefix, no credentials: one line
        found = [
            (u, rel or u.rsplit("/", 1)[-1])
            for u, rel in listed
            if not rel or _event_file(rel.rsplit("/", 1)[-1])
        ]
    else:
        root = Path(raw)
        if not root.exists():
            raise InputError(f"{flag} path does not exist: {root}")
        if root.is_file():
            return [(str(root), root.name)]
        found = [
            (str(p), str(p.relative_to(root)))
            for p in sorted(root.rglob("*"))
            if p.is_file() and _event_file(p.name)
        ]
    if not found:
        raise InputError(f"{flag} {raw}: no .json[.gz] / .jsonl[.gz] files found")
    return found


def _repos(raw: str, fetch: Callable[[str], Path] | None) -> tuple[Path, list[tuple[str, str]]]:
    """(root, [(repository, path relative to root)]) of ``--repos raw``: a repository or a
    directory of them; a URL is fetched first (``fetch``: git reads files by path, it cannot stream)."""
    if is_url(raw):
        if fetch is None:
            raise InputError(f"--repos {raw}: repositories in object storage need a directory to fetch to")
        root = fetch(raw)
    else:
        root = Path(raw)
        if not root.exists():
            raise InputError(f"--repos path does not exist: {root}")
    found = discover_repos(root) if root.is_dir() else []
    if not found:
        raise InputError(f"--repos {raw}: no git repositories found")
    return root, [(str(p), p.name if p == root else str(p.relative_to(root))) for p in found]


def list_units(
    events: list[str], api: list[str], repos: list[str], fetch: Callable[[str], Path] | None = None
) -> list[MineUnit]:
    """Every input file and repository as a unit, events and API dumps listed before any
    repository given as a URL is fetched (a bad URL is one line before that download)."""
    units: list[MineUnit] = []
    for flag, kind, paths in (("--events", "events", events), ("--api", "api", api)):
        for raw in paths:
            root = raw if is_url(raw) else str(Path(raw))
            for path, rel in _files(raw, flag):
                units.append(MineUnit(kind=kind, path=path, root=root, prefix=f"{kind}:{rel}"))
    for raw in repos:
        root, found = _repos(raw, fetch)
        for path, rel in found:
            units.append(MineUnit(kind="git", path=path, root=str(root), prefix=f"git:{rel}"))
    if not units:
        raise InputError("no inputs: give at least one of --events, --api, --repos")
    return units
