"""Merge the observations of one entity into one record, deterministically.

The same issue arrives in many events, an API dump and (for pulls) git history. Observations
are ordered by (observed time, source, content) — never by arrival order, so both engines
merge identically — and overlaid: for each field the newest non-empty value wins, except:
``created_at`` is the earliest seen; a pull is ``merged`` once any observation says so
(merging is irreversible); ``api_files`` pages are united by file name; the git facts of a
pull come from its newest git observation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

_META = ("_observed_at", "_source")


def _order(obs: dict[str, Any]) -> tuple[str, str, str]:
    return (obs.get("_observed_at") or "", obs.get("_source") or "", json.dumps(obs, sort_keys=True))


def merge_entity(kind: str, payloads: Iterable[str]) -> dict[str, Any]:
    observations = sorted((json.loads(p) for p in payloads), key=_order)
    if not observations:
        raise ValueError(f"no observations to merge for a {kind}")
    merged: dict[str, Any] = {}
    created: list[str] = []
    merged_flags: list[Any] = []
    files: dict[str, dict[str, Any]] = {}
    for obs in observations:
        for key, value in obs.items():
            if key in _META or value is None or value == "" or value == []:
                continue
            if key == "api_files":
                for f in value:
                    files[f["filename"]] = f
                continue
            merged[key] = value
        if obs.get("created_at"):
            created.append(obs["created_at"])
        merged_flags.append(obs.get("merged"))
    if created:
        merged["created_at"] = min(created)
    if kind == "pull":
        if any(f is True for f in merged_flags) or merged.get("merged_at") or merged.get("git"):
            merged["merged"] = True
        elif any(f is False for f in merged_flags):
            merged["merged"] = False
        else:
            merged["merged"] = None
        if files:
            merged["api_files"] = [files[k] for k in sorted(files)]
    merged["sources"] = sorted({o.get("_source") or "" for o in observations})
    merged["n_observations"] = len(observations)
    return merged


def entity_row(kind: str, key: str, repo: str, number: int | None, payloads: Iterable[str]) -> dict[str, Any]:
    """The engine row of a merged entity; ``merged`` is promoted for the linking SQL."""
    payload = merge_entity(kind, payloads)
    return {
        "kind": kind,
        "key": key,
        "repo": repo,
        "number": number,
        "merged": bool(payload.get("merged")) if kind == "pull" else None,
        "payload": json.dumps(payload, sort_keys=True, ensure_ascii=False),
    }
