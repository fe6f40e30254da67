"""GitHub REST API dumps -> observations.

Accepted files:
* ``.json``: one API object, a list of them, or a search result (``{"items": [...]}``);
* ``.jsonl`` / ``.ndjson`` (optionally ``.gz``): one object (or list) per line;
* recorded HTTP cassettes (betamax / VCR ``{"http_interactions": [...]}``, as shipped in
  github3.py's test suite): each response is decoded, and its request URL says what it belongs
  to — ``/pulls/N/files`` pages, ``/pulls/N`` diffs, ``/issues/N/events`` and
  ``/issues/N/timeline`` items, which carry no back-reference of their own.

Objects are recognised by shape: events, pulls, issues (and the issue view of pulls),
comments / reviews, repositories, issue events and timeline items. Anything else is an
``unsupported_object`` reject; a file-list without a URL is ``unattributable_object``.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from typing import Any

from core.records import find_lone_surrogate, load_json
from core.storage import open_input
from swe_envs.mining.config import ReadConfig
from swe_envs.mining.events import EventSkipped, event_observations
from swe_envs.mining.github_objects import (
    normalize_comment,
    normalize_issue,
    normalize_pull,
    normalize_repo,
    repo_name_of,
)
from swe_envs.mining.observations import COMMIT_REF_PREFIX, LINK_PREFIX, PR_COMMIT, Bad, MissingField, Obs
from swe_envs.mining.refs import iso_utc, repo_key

SOURCE = "api"
_ISSUE_CTX = re.compile(r"/repos/([^/\s]+/[^/\s]+)/issues/(\d+)/(?:events|timeline)")
_PULL_FILES = re.compile(r"/repos/([^/\s]+/[^/\s]+)/pulls/(\d+)/files")
_ISSUE_URL = re.compile(r"/(?:issues|pull|pulls)/\d+")
_PULL = re.compile(r"/repos/([^/\s]+/[^/\s]+)/pulls/(\d+)(?:[?#]|$)")
Result = list[Obs] | Bad


def _issue_event(obj: dict[str, Any], ctx: tuple[str, int] | None, at: str) -> list[Obs]:
    out: list[Obs] = []
    issue = obj.get("issue")
    if isinstance(issue, dict):
        out += normalize_issue(issue, at, SOURCE)
        ctx = (out[0].payload["repo_name"], out[0].number)
    if ctx is None:
        raise MissingField("issue (no issue object and no /issues/N URL)")
    repo, number = repo_key(ctx[0]), ctx[1]
    event, sha = obj.get("event"), obj.get("commit_id")
    when = iso_utc(obj.get("created_at")) or at
    if event == "closed" and isinstance(sha, str) and sha:
        out.append(
            Obs(
                COMMIT_REF_PREFIX + "timeline",
                repo,
                sha=sha,
                ref_repo=repo,
                ref_number=number,
                observed_at=when,
                source=SOURCE,
            )
        )
    elif event == "merged" and isinstance(sha, str) and sha:
        out.append(Obs(PR_COMMIT, repo, number, sha=sha, observed_at=when, source=SOURCE))
    elif event == "cross-referenced":
        src = obj.get("source") if isinstance(obj.get("source"), dict) else {}
        ref = src.get("issue") if isinstance(src.get("issue"), dict) else None
        if ref is not None and isinstance(ref.get("pull_request"), dict):
            pr_repo = repo_key(repo_name_of(ref))
            pr_number = ref.get("number")
            if isinstance(pr_number, int):
                out.append(
                    Obs(
                        LINK_PREFIX + "timeline_cross_reference",
                        pr_repo,
                        pr_number,
                        ref_repo=repo,
                        ref_number=number,
                        observed_at=when,
                        source=SOURCE,
                    )
                )
    if not out:
        raise EventSkipped("unused_issue_event", str(event))
    return out


def _issue_like(obj: dict[str, Any]) -> bool:
    """Issues and the issue view of PRs — not milestones or projects, which also have numbers."""
    urls = [obj.get(k) for k in ("html_url", "url") if isinstance(obj.get(k), str)]
    if urls:
        return any(_ISSUE_URL.search(u) for u in urls)
    return "labels" in obj or "comments" in obj or "pull_request" in obj


def object_observations(obj: Any, uri: str | None = None, at: str = "") -> list[Obs]:
    """Observations of one API object; raises MissingField / EventSkipped for the caller."""
    if not isinstance(obj, dict):
        raise EventSkipped("unsupported_object", type(obj).__name__)
    ctx_match = _ISSUE_CTX.search(uri or "")
    ctx = (ctx_match.group(1), int(ctx_match.group(2))) if ctx_match else None
    if "type" in obj and "payload" in obj:
        return event_observations(obj, SOURCE)
    if "event" in obj and ("commit_id" in obj or "issue" in obj or "source" in obj or ctx):
        return _issue_event(obj, ctx, at)
    if isinstance(obj.get("head"), dict) and isinstance(obj.get("base"), dict) and "number" in obj:
        return normalize_pull(obj, at, SOURCE)
    if "number" in obj and any(k in obj for k in ("title", "title_text", "title_html")) and _issue_like(obj):
        return normalize_issue(obj, at, SOURCE)
    if "issue_url" in obj or "pull_request_url" in obj:
        kind = "comment"
        if "pull_request_url" in obj and "issue_url" not in obj:
            kind = "review_comment" if "diff_hunk" in obj else "review"
        return [normalize_comment(obj, at, SOURCE, kind=kind)]
    if isinstance(obj.get("full_name"), str) and ("fork" in obj or "owner" in obj):
        return [normalize_repo(obj, at, SOURCE)]
    if "filename" in obj and "status" in obj:
        raise EventSkipped("unattributable_object", "a PR file without its /pulls/N/files URL")
    raise EventSkipped("unsupported_object", ",".join(sorted(obj)[:6]))


def _files_obs(files: list[Any], uri: str, at: str) -> list[Obs]:
    m = _PULL_FILES.search(uri)
    name, number = m.group(1), int(m.group(2))
    kept = []
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
            raise MissingField("filename")
        kept.append(
            {
                k: f.get(k)
                for k in ("filename", "previous_filename", "status", "additions", "deletions", "patch")
            }
        )
    payload = {"repo_name": name, "number": number, "api_files": kept}
    return [Obs("pull", repo_key(name), number, payload=payload, observed_at=at, source=SOURCE)]


def _guard(fn, value: Any, *args) -> Result:
    """``fn(value, *args)``, or a counted reject: a value holding a lone surrogate ("\\udcff" in
    JSON: a valid escape, but no UTF-8 writer can store it, nor a reject naming its keys)."""
    bad_char = find_lone_surrogate(value)
    if bad_char:
        return Bad("invalid_unicode", f"{bad_char} is a lone surrogate")
    try:
        return fn(value, *args)
    except EventSkipped as skip:
        return Bad(skip.reason, skip.detail)
    except MissingField as err:
        return Bad("missing_field", err.what)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
        # a field of a type no normaliser foresaw: this object is a counted reject, the dump goes on
        return Bad("malformed_object", f"{type(err).__name__}: {err}"[:500])


def _items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and isinstance(value.get("items"), list) and "total_count" in value:
        return value["items"]
    return [value]


def _each_item(value: Any, base: str, sep: str, *where: Any) -> Iterator[tuple[str, Result]]:
    """(id, observations) per object of a response; an empty list is one counted reject, so the
    record is accounted for."""
    items = _items(value)
    if not items:
        yield base, Bad("empty_list", "the response holds no objects")
    for j, item in enumerate(items):
        yield f"{base}{sep}{j}", _guard(object_observations, item, *where)


def _response_body(interaction: dict[str, Any]) -> tuple[bytes | None, str]:
    resp = interaction.get("response") or {}
    body = resp.get("body") or {}
    raw: bytes | None = None
    if body.get("base64_string"):
        raw = base64.b64decode(body["base64_string"])
    elif isinstance(body.get("string"), str) and body["string"]:
        raw = body["string"].encode("utf-8")
    if raw is not None and raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    status = resp.get("status") or {}
    code = status.get("code") if isinstance(status, dict) else status
    return raw, str(code or "")


def _cassette(doc: dict[str, Any], prefix: str, cfg: ReadConfig) -> Iterator[tuple[str, Result]]:
    interactions = doc.get("http_interactions")
    if not isinstance(interactions, list) or not interactions:
        yield prefix, Bad("malformed_cassette", f"http_interactions is {type(interactions).__name__}, not a list"
                          if not isinstance(interactions, list) else "no interactions")
        return
    for i, inter in enumerate(interactions):
        rec = f"{prefix}#i{i}"
        if not isinstance(inter, dict):
            yield rec, Bad("malformed_interaction", type(inter).__name__)
            continue
        request, response = inter.get("request"), inter.get("response")
        uri = (request.get("uri") if isinstance(request, dict) else None) or ""
        uri = uri if isinstance(uri, str) else ""
        headers = (response.get("headers") if isinstance(response, dict) else None) or {}
        date = headers.get("Date") if isinstance(headers, dict) else None
        at = _http_date(date)
        try:
            raw, code = _response_body(inter)
        except (ValueError, OSError, EOFError, zlib.error, TypeError, AttributeError) as err:
            yield rec, Bad("undecodable", f"{uri}: {err}")
            continue
        if not code.startswith("2"):
            yield rec, Bad("http_error", f"{code} {uri}")
            continue
        if not raw:
            yield rec, Bad("empty_response", uri)
            continue
        if len(raw) > cfg.max_record_bytes:
            yield rec, Bad("record_too_large", f"{len(raw)} bytes: {uri}")
            continue
        text = raw.decode("utf-8", errors="replace")
        try:
            value = load_json(text)
        except json.JSONDecodeError:
            m = _PULL.search(uri)
            if m and text.startswith("diff --git"):
                payload = {"repo_name": m.group(1), "number": int(m.group(2)), "api_diff": text}
                yield (
                    rec,
                    [
                        Obs(
                            "pull",
                            repo_key(m.group(1)),
                            int(m.group(2)),
                            payload,
                            observed_at=at,
                            source=SOURCE,
                        )
                    ],
                )
            else:
                yield rec, Bad("non_json_response", uri, text[: cfg.reject_text_chars])
            continue
        if isinstance(value, list) and _PULL_FILES.search(uri):
            yield rec, _guard(_files_obs, value, uri, at)
            continue
        yield from _each_item(value, rec, ".", uri, at)


def _http_date(value: Any) -> str:
    from email.utils import parsedate_to_datetime

    if not isinstance(value, str):
        return ""
    try:
        return iso_utc(parsedate_to_datetime(value).isoformat()) or ""
    except (TypeError, ValueError):
        return ""


def read_api_dump(path: str, prefix: str, cfg: ReadConfig) -> Iterator[tuple[str, Result]]:
    """(record id, observations or Bad) for every object in an API dump file."""
    lower = path.lower()
    try:
        if lower.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")):
            with open_input(path, gunzip=True) as fh:  # a file, or an object read in ranges
                for n, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    shown = line[: cfg.reject_text_chars].decode("utf-8", errors="replace")
                    try:
                        value = load_json(line)
                    except (json.JSONDecodeError, UnicodeDecodeError) as err:
                        yield f"{prefix}#L{n}", Bad("malformed_json", str(err), shown)
                        continue
                    yield from _each_item(value, f"{prefix}#L{n}", ".")
            return
        with open_input(path, gunzip=True) as fh:
            raw = fh.read(cfg.max_file_bytes + 1)
    except (OSError, EOFError, zlib.error) as err:
        yield prefix, Bad("unreadable_file", str(err))
        return
    if len(raw) > cfg.max_file_bytes:
        yield prefix, Bad("record_too_large", f"file over max_file_bytes={cfg.max_file_bytes}")
        return
    try:
        value = load_json(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        shown = raw[: cfg.reject_text_chars].decode("utf-8", errors="replace")
        yield prefix, Bad("malformed_json", str(err), shown)
        return
    if isinstance(value, dict) and "http_interactions" in value:
        yield from _cassette(value, prefix, cfg)
        return
    yield from _each_item(value, prefix, "#")
