"""A candidate (issue, PR) pair assembled from one row of the linking join.

The join hands over JSON payloads and unordered lists (their order depends on the engine);
everything is parsed and sorted here so both engines build byte-identical pairs.
"""

from __future__ import annotations

import json
from typing import Any

from swe_envs.mining.observations import LINK_PREFIX


def pair_id(pr_repo: str, pr_number: int, issue_repo: str, issue_number: int) -> str:
    return f"{pr_repo}#{pr_number}:{issue_repo}#{issue_number}"


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _comments(raw: list[str] | None, on: str) -> list[dict[str, Any]]:
    out = []
    for c in raw or []:
        payload = _loads(c)
        payload["on"] = on
        out.append(payload)
    return out


def instance_id(repo_name: str, pr_number: int, issue_number: int, several_issues: bool) -> str:
    """SWE-bench's ``owner__name-PR``; a PR kept for several issues gets the issue appended."""
    base = f"{repo_name.replace('/', '__')}-{pr_number}"
    return f"{base}-i{issue_number}" if several_issues else base


def assemble_pair(row: dict[str, Any]) -> dict[str, Any]:
    issue, pull = _loads(row["issue"]), _loads(row["pull"])
    comments = _comments(row.get("issue_comments"), "issue") + _comments(row.get("pull_comments"), "pull")
    comments.sort(key=lambda c: (c.get("created_at") or "", c.get("id") or 0, c["on"]))
    issue_prs = sorted(set(row.get("issue_links") or []))
    pr_issues = sorted(set(row.get("pr_links") or []))
    flags = []
    if len(issue_prs) > 1:
        flags.append("issue_linked_to_several_prs")
    if len(pr_issues) > 1:
        flags.append("pr_linked_to_several_issues")
    if row["issue_repo"] != row["pr_repo"]:
        flags.append("cross_repo")
    repo_name = pull.get("repo_name") or row["pr_repo"]
    return {
        "id": pair_id(row["pr_repo"], row["pr_number"], row["issue_repo"], row["issue_number"]),
        "instance_id": instance_id(repo_name, row["pr_number"], row["issue_number"], len(pr_issues) > 1),
        "repo": row["pr_repo"],
        "repo_name": repo_name,
        "issue_repo": row["issue_repo"],
        "pr_number": int(row["pr_number"]),
        "issue_number": int(row["issue_number"]),
        "issue": issue,
        "pull": pull,
        "link_kinds": sorted({k.removeprefix(LINK_PREFIX) for k in row.get("link_kinds") or []}),
        "issue_linked_prs": issue_prs,
        "merged_prs": int(row.get("merged_prs") or 0),
        "pr_linked_issues": pr_issues,
        "repo_meta": _loads(row.get("repo_meta")),
        "git_repo": _loads(row.get("git_repo")),
        "comments": comments,
        "flags": flags,
    }


def problem_statement(pair: dict[str, Any]) -> str:
    """SWE-bench's problem statement: the issue title, a newline, the issue body."""
    issue = pair["issue"]
    return f"{issue.get('title') or ''}\n{issue.get('body') or ''}".strip() + "\n"
