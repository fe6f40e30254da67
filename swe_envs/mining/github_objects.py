"""GitHub REST API objects -> observations, tolerant of API versions.

The same objects arrive in API dumps and embedded in GH-Archive event payloads. Versions
differ: ``body`` may be absent with ``body_text``/``body_html`` present (the ``full+json``
media type), ``merged`` is missing from older pull objects (``merged_at`` decides), the issue
view of a pull request carries ``pull_request`` (with ``merged_at`` only in newer versions),
stars are ``stargazers_count`` or the old ``watchers``; URLs may be GitHub Enterprise. A field
the miner cannot do without raises ``MissingField`` (the caller turns it into a reject).
"""

from __future__ import annotations

import html
import re
from typing import Any

from swe_envs.mining.observations import LINK_PREFIX, PR_COMMIT, MissingField, Obs
from swe_envs.mining.refs import closing_refs, iso_utc, repo_from_url, repo_key

_TAG = re.compile(r"<[^>]+>")


def _text(obj: dict[str, Any], field: str) -> str:
    """``field`` (body/title), falling back to the text/HTML renderings of other media types."""
    value = obj.get(field)
    if isinstance(value, str):
        return value
    for alt in (f"{field}_text", f"{field}_html"):
        v = obj.get(alt)
        if isinstance(v, str):
            return html.unescape(_TAG.sub("", v)) if alt.endswith("html") else v
    return ""


def _user(obj: dict[str, Any], field: str = "user") -> tuple[str | None, str | None]:
    u = obj.get(field)
    if isinstance(u, dict):
        return u.get("login"), u.get("type")
    if isinstance(u, str):  # very old payloads: a login string
        return u, None
    return None, None


def _number(obj: dict[str, Any]) -> int:
    n = obj.get("number")
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise MissingField("number")
    return n


def repo_name_of(obj: dict[str, Any], hint: str | None = None) -> str:
    """owner/name of the repository an issue/pull/comment belongs to (display case)."""
    base = obj.get("base")
    if isinstance(base, dict) and isinstance(base.get("repo"), dict):
        name = base["repo"].get("full_name")
        if isinstance(name, str) and "/" in name:
            return name
    for field in ("repository_url", "url", "issue_url", "pull_request_url", "html_url"):
        name = repo_from_url(obj.get(field))
        if name:
            return name
    repo = obj.get("repository")
    if isinstance(repo, dict) and isinstance(repo.get("full_name"), str):
        return repo["full_name"]
    if hint:
        return hint
    raise MissingField("repository")


def normalize_repo(obj: dict[str, Any], observed_at: str, source: str) -> Obs:
    name = obj.get("full_name")
    if not isinstance(name, str) or "/" not in name:
        owner = obj.get("owner")
        owner = owner.get("login") if isinstance(owner, dict) else owner
        if isinstance(owner, str) and isinstance(obj.get("name"), str):
            name = f"{owner}/{obj['name']}"
        else:
            raise MissingField("full_name")
    lic = obj.get("license")
    license_id = None
    if isinstance(lic, dict):
        license_id = lic.get("spdx_id") or (lic.get("key") or "").upper() or None
    elif isinstance(lic, str):
        license_id = lic
    stars = obj.get("stargazers_count", obj.get("watchers_count", obj.get("watchers")))
    payload = {
        "repo_name": name,
        "fork": obj.get("fork"),
        "archived": obj.get("archived"),
        "disabled": obj.get("disabled"),
        "stars": stars if isinstance(stars, int) and not isinstance(stars, bool) else None,
        "license": license_id,
        "language": obj.get("language"),
        "default_branch": obj.get("default_branch") or obj.get("master_branch"),
    }
    at = iso_utc(obj.get("pushed_at")) or iso_utc(obj.get("updated_at")) or observed_at
    return Obs("repo", repo_key(name), payload=payload, observed_at=at, source=source)


def _pull_links(repo: str, number: int, title: str, body: str, observed_at: str, source: str) -> list[Obs]:
    out = []
    for kind, text in (("pr_title", title), ("pr_body", body)):
        for ref_repo, ref_number in closing_refs(text, repo):
            out.append(
                Obs(
                    LINK_PREFIX + kind,
                    repo,
                    number,
                    ref_repo=ref_repo,
                    ref_number=ref_number,
                    observed_at=observed_at,
                    source=source,
                )
            )
    return out


def normalize_pull(obj: dict[str, Any], observed_at: str, source: str, hint: str | None = None) -> list[Obs]:
    """A pull-request object -> the pull, its closing links, its commits and its base repo."""
    number = _number(obj)
    name = repo_name_of(obj, hint)
    repo = repo_key(name)
    title, body = _text(obj, "title"), _text(obj, "body")
    login, utype = _user(obj)
    merged_at = iso_utc(obj.get("merged_at"))
    merged = obj.get("merged")
    if not isinstance(merged, bool):
        merged = True if merged_at else (False if obj.get("state") == "closed" else None)
    base = obj.get("base") if isinstance(obj.get("base"), dict) else {}
    head = obj.get("head") if isinstance(obj.get("head"), dict) else {}
    head_repo = head.get("repo") if isinstance(head.get("repo"), dict) else {}
    payload = {
        "repo_name": name,
        "number": number,
        "title": title,
        "body": body,
        "author": login,
        "author_type": utype,
        "created_at": iso_utc(obj.get("created_at")),
        "updated_at": iso_utc(obj.get("updated_at")),
        "closed_at": iso_utc(obj.get("closed_at")),
        "merged_at": merged_at,
        "merged": merged,
        "merge_commit_sha": obj.get("merge_commit_sha"),
        "base_sha": base.get("sha"),
        "base_ref": base.get("ref"),
        "head_sha": head.get("sha"),
        "head_repo": head_repo.get("full_name"),
        "changed_files": obj.get("changed_files"),
        "additions": obj.get("additions"),
        "deletions": obj.get("deletions"),
        "state": obj.get("state"),
        "html_url": obj.get("html_url"),
    }
    at = payload["updated_at"] or observed_at
    out = [Obs("pull", repo, number, payload=payload, observed_at=at, source=source)]
    out += _pull_links(repo, number, title, body, at, source)
    for sha in {payload["merge_commit_sha"] if merged else None, payload["head_sha"]}:
        if isinstance(sha, str) and sha:
            out.append(Obs(PR_COMMIT, repo, number, sha=sha, observed_at=at, source=source))
    if isinstance(base.get("repo"), dict):
        try:
            out.append(normalize_repo(base["repo"], at, source))
        except MissingField:
            pass  # the pull itself is fine; the repo stays unknown
    return out


def normalize_issue(obj: dict[str, Any], observed_at: str, source: str, hint: str | None = None) -> list[Obs]:
    """An issue object; the issue view of a pull request becomes a partial pull observation."""
    number = _number(obj)
    name = repo_name_of(obj, hint)
    repo = repo_key(name)
    title = _text(obj, "title")
    if not title and "title" not in obj and "title_text" not in obj:
        raise MissingField("title")
    login, utype = _user(obj)
    labels = [lb.get("name") if isinstance(lb, dict) else lb for lb in obj.get("labels") or []]
    at = iso_utc(obj.get("updated_at")) or observed_at
    common = {
        "repo_name": name,
        "number": number,
        "title": title,
        "body": _text(obj, "body"),
        "author": login,
        "author_type": utype,
        "created_at": iso_utc(obj.get("created_at")),
        "updated_at": iso_utc(obj.get("updated_at")),
        "closed_at": iso_utc(obj.get("closed_at")),
        "state": obj.get("state"),
        "html_url": obj.get("html_url"),
    }
    pr = obj.get("pull_request")
    if isinstance(pr, dict):
        merged_at = iso_utc(pr.get("merged_at"))
        payload = common | {"merged_at": merged_at, "merged": True if merged_at else None}
        out = [Obs("pull", repo, number, payload=payload, observed_at=at, source=source)]
        return out + _pull_links(repo, number, title, common["body"], at, source)
    payload = common | {
        "labels": [lb for lb in labels if isinstance(lb, str)],
        "author_association": obj.get("author_association"),
    }
    return [Obs("issue", repo, number, payload=payload, observed_at=at, source=source)]


def normalize_comment(
    obj: dict[str, Any],
    observed_at: str,
    source: str,
    *,
    kind: str = "comment",
    parent: tuple[str, int] | None = None,
    on: str | None = None,
) -> Obs:
    """An issue/PR conversation comment, a review, or a review comment on a diff line."""
    cid = obj.get("id")
    if not isinstance(cid, int) or isinstance(cid, bool):
        raise MissingField("comment id")
    if parent is None:
        url = obj.get("issue_url") or obj.get("pull_request_url") or obj.get("url")
        name = repo_from_url(url)
        m = re.search(r"/(?:issues|pulls)/(\d+)", url or "")
        if not name or not m:
            raise MissingField("issue_url")
        parent = (name, int(m.group(1)))
        if on is None:
            on = "pull" if "pull_request_url" in obj and "issue_url" not in obj else "issue"
    login, utype = _user(obj)
    payload = {
        "id": cid,
        "kind": kind,
        "on": on or "issue",
        "repo_name": parent[0],
        "number": parent[1],
        "author": login,
        "author_type": utype,
        "created_at": iso_utc(obj.get("created_at") or obj.get("submitted_at")),
        "body": _text(obj, "body"),
        "path": obj.get("path"),
    }
    at = iso_utc(obj.get("updated_at")) or observed_at
    return Obs("comment", repo_key(parent[0]), parent[1], payload=payload, observed_at=at, source=source)
