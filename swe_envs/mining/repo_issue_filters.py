"""The repository filter (relaxed) and the issue filter (strict), one reason per rejection.

Each function returns ``None`` to keep a pair or a short categorical reason; the first rule
that fails decides, in the order listed, so per-reason counts show what each rule removed.
"""

from __future__ import annotations

from typing import Any

from swe_envs.mining.config import IssueFilterConfig, RepoFilterConfig
from swe_envs.mining.text_checks import analyze, is_bot, text_problem

_UNKNOWN_LICENSES = {None, "", "NOASSERTION", "OTHER", "NONE"}


def repo_problem(pair: dict[str, Any], cfg: RepoFilterConfig) -> str | None:
    if pair["repo"] in {r.lower() for r in cfg.exclude_repos}:
        return "excluded_repo"
    meta = pair.get("repo_meta")
    if not meta:
        return None if cfg.allow_unknown_metadata else "repo_metadata_unknown"
    if cfg.exclude_forks and meta.get("fork") is True:
        return "fork"
    if cfg.exclude_archived and meta.get("archived") is True:
        return "archived"
    if cfg.exclude_disabled and meta.get("disabled") is True:
        return "disabled"
    stars = meta.get("stars")
    if stars is None and not cfg.allow_unknown_metadata:
        return "stars_unknown"
    if stars is not None and stars < cfg.min_stars:
        return "too_few_stars"
    lic = meta.get("license")
    lic = lic.upper() if isinstance(lic, str) else lic
    if lic in _UNKNOWN_LICENSES:
        return None if cfg.allow_unknown_license else "license_unknown"
    if cfg.allowed_licenses is not None and lic not in {x.upper() for x in cfg.allowed_licenses}:
        return "license_not_allowed"
    return None


def pr_created_at(pull: dict[str, Any]) -> str | None:
    """API creation time; for a PR known only from git, its first commit's author time."""
    return pull.get("created_at") or (pull.get("git") or {}).get("first_commit_at")


def issue_problem(pair: dict[str, Any], cfg: IssueFilterConfig) -> tuple[str | None, dict[str, Any]]:
    """(reason or None, measurements recorded in the document's metadata)."""
    issue, pull = pair["issue"], pair["pull"]
    if not cfg.allow_cross_repo and "cross_repo" in pair["flags"]:
        return "cross_repo_link", {}
    if is_bot(issue.get("author"), issue.get("author_type"), cfg.bot_logins, cfg.bot_login_patterns):
        return "bot_issue_author", {}
    if is_bot(pull.get("author"), pull.get("author_type"), cfg.bot_logins, cfg.bot_login_patterns):
        return "bot_pr_author", {}
    if cfg.require_merged and not pull.get("merged"):
        return "pr_not_merged", {}
    if cfg.exactly_one_merged_pr and pair["merged_prs"] > 1:
        return "several_merged_prs", {}
    if cfg.reject_pr_with_several_issues and len(pair["pr_linked_issues"]) > 1:
        return "pr_links_several_issues", {}
    if cfg.require_pr_after_issue:
        issue_at, pr_at = issue.get("created_at"), pr_created_at(pull)
        if not issue_at or not pr_at:
            return "created_at_unknown", {}
        if pr_at <= issue_at:  # ISO-8601 UTC strings order like times
            return "pr_before_issue", {}
    report = analyze(issue.get("title") or "", issue.get("body") or "")
    info = {
        "prose_chars": report.prose_chars,
        "words": report.words,
        "trace_fraction": round(report.trace_fraction, 3),
        "language": report.language,
        "language_score": round(report.language_score, 3),
    }
    reason = text_problem(report, cfg.min_chars, cfg.min_words, cfg.max_chars, cfg.max_stack_trace_fraction)
    if reason:
        return reason, info
    lang = report.language if report.language_score >= cfg.min_language_score else "unknown"
    if lang not in cfg.languages:
        return "language_not_allowed", info | {"language": lang}
    return None, info
