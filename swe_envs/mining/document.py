"""Training documents and SWE-bench task instances from a kept pair.

Document text format (one document per pair; XML-like tags, attributes double-quoted)::

    <repository name="owner/name" base_commit="SHA"/>
    <issue number="N" author="LOGIN" created_at="ISO">
    <title>TITLE</title>
    BODY
    </issue>
    <discussion>
    <comment on="issue|pull" kind="comment|review|review_comment" author="LOGIN" created_at="ISO">
    BODY
    </comment>
    ...
    </discussion>
    <relevant_files budget_tokens="B" method="METHOD">
    <file path="PATH" reason="touched|imports|imported_by|cochange|lexical|same_dir">
    CONTENTS AT BASE COMMIT
    </file>
    ...
    </relevant_files>
    <pull_request number="N" author="LOGIN" merged_at="ISO">
    <title>TITLE</title>
    BODY
    </pull_request>
    <patch>
    UNIFIED DIFF (code and tests)
    </patch>

The discussion holds the issue's and the PR's comments up to the merge, bots excluded.
The SWE-bench instance (schema: ``swe_envs.instance``): ``patch`` is the non-test part of the
diff, ``test_patch`` the test part, ``hints_text`` the issue comments made before the PR was
opened.
"""

from __future__ import annotations

from typing import Any

from swe_envs.instance import new_instance
from swe_envs.mining.config import DocumentConfig, IssueFilterConfig
from swe_envs.mining.pairs import problem_statement
from swe_envs.mining.repo_issue_filters import pr_created_at
from swe_envs.mining.text_checks import is_bot


def _attr(value: Any) -> str:
    return str(value if value is not None else "").replace("&", "&amp;").replace('"', "&quot;")


def discussion(pair: dict[str, Any], cfg: DocumentConfig, bots: IssueFilterConfig) -> list[dict[str, Any]]:
    until = pair["pull"].get("merged_at") or "9999"
    out = []
    for c in pair["comments"]:
        if not (c.get("body") or "").strip():
            continue
        if (c.get("created_at") or "") > until:
            continue
        if not cfg.include_bot_comments and is_bot(
            c.get("author"), c.get("author_type"), bots.bot_logins, bots.bot_login_patterns
        ):
            continue
        out.append(c)
    return out[: cfg.max_comments]


def format_document(
    pair: dict[str, Any],
    files: list[tuple[str, str]],
    selection: dict[str, Any],
    diff_text: str,
    base_commit: str | None,
    comments: list[dict[str, Any]],
    cfg: DocumentConfig,
) -> str:
    issue, pull = pair["issue"], pair["pull"]
    reasons = {f["path"]: f["reason"] for f in selection.get("files", [])}
    parts = [
        f'<repository name="{_attr(pair["repo_name"])}" base_commit="{_attr(base_commit)}"/>',
        f'<issue number="{pair["issue_number"]}" author="{_attr(issue.get("author"))}" '
        f'created_at="{_attr(issue.get("created_at"))}">',
        f"<title>{issue.get('title') or ''}</title>",
        (issue.get("body") or "").strip(),
        "</issue>",
        "<discussion>",
    ]
    for c in comments:
        body = c["body"].strip()[: cfg.max_comment_chars]
        parts += [
            f'<comment on="{c["on"]}" kind="{_attr(c.get("kind"))}" author="{_attr(c.get("author"))}" '
            f'created_at="{_attr(c.get("created_at"))}">',
            body,
            "</comment>",
        ]
    parts += [
        "</discussion>",
        f'<relevant_files budget_tokens="{selection.get("budget_tokens", "")}" method="{_attr(selection.get("method"))}">',
    ]
    for path, text in files:
        parts += [
            f'<file path="{_attr(path)}" reason="{reasons.get(path, "")}">',
            text.rstrip("\n"),
            "</file>",
        ]
    parts += [
        "</relevant_files>",
        f'<pull_request number="{pair["pr_number"]}" author="{_attr(pull.get("author"))}" '
        f'merged_at="{_attr(pull.get("merged_at"))}">',
        f"<title>{pull.get('title') or ''}</title>",
        (pull.get("body") or "").strip(),
        "</pull_request>",
        "<patch>",
        diff_text.rstrip("\n"),
        "</patch>",
    ]
    return "\n".join(parts) + "\n"


def swe_instance(
    pair: dict[str, Any],
    code_patch: str,
    test_patch: str,
    base_commit: str | None,
    comments: list[dict[str, Any]],
) -> dict[str, Any]:
    opened = pr_created_at(pair["pull"]) or ""
    hints = [
        c["body"].strip() for c in comments if c["on"] == "issue" and (c.get("created_at") or "") < opened
    ]
    return new_instance(
        instance_id=pair["instance_id"],
        repo=pair["repo_name"],
        base_commit=base_commit,
        problem_statement=problem_statement(pair),
        hints_text="\n\n".join(hints),
        patch=code_patch,
        test_patch=test_patch,
        created_at=opened,
        pull_number=pair["pr_number"],
        issue_numbers=[pair["issue_number"]],
        issue_repo=pair["issue_repo"],
    )
