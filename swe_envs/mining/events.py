"""GH-Archive-style event files (``YYYY-MM-DD-H.json.gz``, one event per line) -> observations.

Events used: ``IssuesEvent``, ``PullRequestEvent``, ``IssueCommentEvent``,
``PullRequestReviewEvent``, ``PullRequestReviewCommentEvent`` — their payloads embed API
issue / pull / comment objects (see ``github_objects``). Other known event types are
``unused_event_type`` rejects, unknown ones ``unknown_event_type``; malformed lines,
undecodable bytes and a truncated gzip stream are rejects too, with the line number.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

from core.records import json_lone_surrogate, load_json
from core.storage import input_size, open_input
from swe_envs.mining.config import ReadConfig
from swe_envs.mining.github_objects import normalize_comment, normalize_issue, normalize_pull
from swe_envs.mining.observations import Bad, MissingField, Obs
from swe_envs.mining.refs import iso_utc

USED_EVENT_TYPES = (
    "IssuesEvent",
    "PullRequestEvent",
    "IssueCommentEvent",
    "PullRequestReviewEvent",
    "PullRequestReviewCommentEvent",
)
# documented GitHub event types the miner has no use for
UNUSED_EVENT_TYPES = (
    "PushEvent",
    "CreateEvent",
    "DeleteEvent",
    "ForkEvent",
    "WatchEvent",
    "ReleaseEvent",
    "MemberEvent",
    "PublicEvent",
    "GollumEvent",
    "CommitCommentEvent",
    "SponsorshipEvent",
    "DiscussionEvent",
    "PullRequestReviewThreadEvent",
    "ForkApplyEvent",
    "DownloadEvent",
    "FollowEvent",
    "GistEvent",
)


class EventSkipped(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _event_repo(event: dict[str, Any]) -> str | None:
    repo = event.get("repo")
    if isinstance(repo, dict) and isinstance(repo.get("name"), str) and "/" in repo["name"]:
        return repo["name"]
    old = event.get("repository")  # GH Archive before 2015
    if isinstance(old, dict):
        owner, name = old.get("owner"), old.get("name")
        owner = owner.get("login") if isinstance(owner, dict) else owner
        if isinstance(owner, str) and isinstance(name, str):
            return f"{owner}/{name}"
    return None


def _obj(payload: dict[str, Any], field: str) -> dict[str, Any]:
    value = payload.get(field)
    if not isinstance(value, dict):
        raise MissingField(f"payload.{field}")
    return value


def event_observations(event: dict[str, Any], source: str) -> list[Obs]:
    etype = event.get("type")
    if not isinstance(etype, str):
        raise MissingField("type")
    if etype not in USED_EVENT_TYPES:
        if etype in UNUSED_EVENT_TYPES:
            raise EventSkipped("unused_event_type", etype)
        raise EventSkipped("unknown_event_type", etype)
    payload = event.get("payload")
    if not isinstance(payload, dict):
        raise MissingField("payload")
    at = iso_utc(event.get("created_at")) or ""
    hint = _event_repo(event)
    if etype == "IssuesEvent":
        return normalize_issue(_obj(payload, "issue"), at, source, hint)
    if etype == "PullRequestEvent":
        return normalize_pull(_obj(payload, "pull_request"), at, source, hint)
    if etype == "IssueCommentEvent":
        issue = _obj(payload, "issue")
        out = normalize_issue(issue, at, source, hint)
        parent = (out[0].payload["repo_name"], out[0].number)
        on = "pull" if out[0].kind == "pull" else "issue"
        return [*out, normalize_comment(_obj(payload, "comment"), at, source, parent=parent, on=on)]
    pull = _obj(payload, "pull_request")
    out = normalize_pull(pull, at, source, hint)
    parent = (out[0].payload["repo_name"], out[0].number)
    if etype == "PullRequestReviewEvent":
        review = _obj(payload, "review")
        return [*out, normalize_comment(review, at, source, kind="review", parent=parent, on="pull")]
    comment = _obj(payload, "comment")
    return [*out, normalize_comment(comment, at, source, kind="review_comment", parent=parent, on="pull")]


def parse_event_line(line: bytes, source: str, cfg: ReadConfig) -> list[Obs] | Bad:
    shown = line[: cfg.reject_text_chars].decode("utf-8", errors="replace")
    if len(line) > cfg.max_record_bytes:
        return Bad("record_too_large", f"{len(line)} bytes > max_record_bytes", shown)
    try:
        event = load_json(line.decode("utf-8"))
    except UnicodeDecodeError as err:
        return Bad("undecodable", str(err), shown)
    except json.JSONDecodeError as err:
        return Bad("malformed_json", str(err), shown)
    if not isinstance(event, dict):
        return Bad("malformed_json", f"expected an object, got {type(event).__name__}", shown)
    bad_char = json_lone_surrogate(line, event)
    if bad_char:  # "\\udcff" in crawled JSON: valid escape, but no UTF-8 writer can store it
        return Bad("invalid_unicode", f"{bad_char} is a lone surrogate", shown)
    meta = {"event_type": event.get("type"), "event_id": event.get("id")}
    try:
        return event_observations(event, source)
    except EventSkipped as skip:
        return Bad(skip.reason, skip.detail, "", meta)
    except MissingField as err:
        return Bad("missing_field", err.what, shown, meta)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
        # a field of a type no normaliser foresaw: this event is a counted reject, the file goes on
        return Bad("malformed_object", f"{type(err).__name__}: {err}"[:500], shown, meta)


def read_events(path: str, record_prefix: str, cfg: ReadConfig) -> Iterator[tuple[str, list[Obs] | Bad]]:
    """(record id, observations or Bad) for every line; a broken stream ends in one Bad."""
    source = "events"
    lineno = 0
    try:
        if path.endswith(".gz") and input_size(path) == 0:
            # Python's gzip reads an empty file as an empty stream; a real gzip has at least a header
            yield f"{record_prefix}", Bad("truncated_gzip", "empty gzip file (cut short before its header)")
            return
        fh = open_input(path, gunzip=True)  # a file, or an object read in ranges
    except OSError as err:
        yield f"{record_prefix}", Bad("unreadable_file", str(err))
        return
    with fh:
        try:
            for lineno, line in enumerate(fh, start=1):  # noqa: B007 - lineno used after a failure
                if line.strip():
                    yield f"{record_prefix}#L{lineno}", parse_event_line(line, source, cfg)
        except (EOFError, OSError, zlib.error) as err:  # truncated or corrupt gzip member
            yield f"{record_prefix}#L{lineno + 1}-", Bad("truncated_gzip", f"after line {lineno}: {err}")
