"""Configuration of the issue–PR mining rules (every threshold lives here, none in code).

GLM-5's recipe relaxes the repository-level filter (forks excluded, but a low star bar and
unknown licenses allowed) and tightens the issue-level filter (clear problem statement, one
merged PR that touches tests and code). The defaults follow that; YAML overrides any key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.config import StrictModel
from filters.minhash import MinhashConfig

PERMISSIVE_LICENSES = [
    "MIT",
    "MIT-0",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "BSD-3-Clause-Clear",
    "ISC",
    "0BSD",
    "Unlicense",
    "CC0-1.0",
    "Zlib",
    "BSL-1.0",
    "PSF-2.0",
    "Python-2.0",
    "WTFPL",
]

# Link kinds that close an issue on GitHub; a timeline cross-reference only mentions it.
CLOSING_LINK_KINDS = [
    "pr_title",
    "pr_body",
    "git_commit_message",
    "git_merge_message",
    "timeline_closed_by_commit",
]
ALL_LINK_KINDS = [*CLOSING_LINK_KINDS, "timeline_cross_reference"]


class LinkConfig(StrictModel):
    # which kinds of evidence make a (PR, issue) pair; the rest are counted as mentions
    closing_kinds: list[str] = list(CLOSING_LINK_KINDS)

    @model_validator(mode="after")
    def _known(self) -> LinkConfig:
        unknown = sorted(set(self.closing_kinds) - set(ALL_LINK_KINDS))
        if unknown:
            raise ValueError(f"unknown link kinds {unknown}; known: {ALL_LINK_KINDS}")
        return self


class RepoFilterConfig(StrictModel):
    exclude_forks: bool = True
    exclude_archived: bool = True
    exclude_disabled: bool = True
    # relaxed on purpose (GLM-5): a handful of stars is enough
    min_stars: int = Field(default=0, ge=0)
    # SPDX ids; null allows any license
    allowed_licenses: list[str] | None = list(PERMISSIVE_LICENSES)
    # no license, NOASSERTION or "other" on GitHub
    allow_unknown_license: bool = True
    # repos seen only through git or events that carry no repository object
    allow_unknown_metadata: bool = True
    exclude_repos: list[str] = []


class IssueFilterConfig(StrictModel):
    # problem statement (title + body) after removing links, templates, code and traces
    min_chars: int = Field(default=80, ge=0)
    min_words: int = Field(default=12, ge=0)
    max_chars: int = Field(default=40_000, gt=0)
    # a body that is mostly a stack trace dump says what broke, not what is wanted
    max_stack_trace_fraction: float = Field(default=0.8, ge=0, le=1)
    bot_logins: list[str] = [
        "dependabot",
        "dependabot-preview",
        "renovate",
        "greenkeeper",
        "pyup-bot",
        "codecov-io",
        "allcontributors",
        "github-actions",
        "stale",
        "mergify",
        "snyk-bot",
        "imgbot",
        "pre-commit-ci",
        "sourcery-ai",
    ]
    bot_login_patterns: list[str] = [r"\[bot\]$", r"[-_]bot$", r"^bot[-_]"]
    require_merged: bool = True
    # the strict filter: exactly one merged PR resolves the issue
    exactly_one_merged_pr: bool = True
    # a PR that closes several issues is flagged; reject it only when asked
    reject_pr_with_several_issues: bool = False
    require_pr_after_issue: bool = True
    allow_cross_repo: bool = True
    # ISO 639-1 codes; "unknown" may be listed to keep texts the detector cannot place
    languages: list[str] = ["en"]
    min_language_score: float = Field(default=0.08, ge=0, le=1)


class PatchFilterConfig(StrictModel):
    min_files: int = Field(default=1, ge=0)
    max_files: int = Field(default=15, gt=0)
    require_test_change: bool = True
    require_source_change: bool = True
    min_changed_lines: int = Field(default=1, ge=0)
    max_changed_lines: int = Field(default=3000, gt=0)
    # a diff bigger than this is not even read (huge generated diffs)
    max_patch_bytes: int = Field(default=1_000_000, gt=0)
    binary: Literal["reject", "drop"] = "reject"
    # extra test-path regexes on top of the per-language heuristics
    extra_test_patterns: list[str] = []
    git_timeout_s: float = Field(default=60.0, gt=0)


class NearDuplicateConfig(StrictModel):
    """Near-duplicate matching: the one MinHash (``filters.minhash``) with a Jaccard check on
    its candidates (its own name: ``filters.minhash.MinhashConfig`` is the signature alone)."""

    ngram: int = Field(default=5, gt=0)
    bands: int = Field(default=14, gt=0)
    rows: int = Field(default=8, gt=0)
    seed: int = 1
    # candidate pairs (sharing a band) are kept as duplicates only at this estimated Jaccard
    threshold: float = Field(default=0.7, ge=0, le=1)

    def signatures(self) -> MinhashConfig:
        return MinhashConfig(ngram=self.ngram, bands=self.bands, rows=self.rows, seed=self.seed)


class DedupConfig(StrictModel):
    enabled: bool = True
    minhash: NearDuplicateConfig = NearDuplicateConfig()


class DecontamConfig(StrictModel):
    # SWE-bench-style instance JSONL files (instance_id, repo, problem_statement, ...)
    benchmarks: list[str] = []
    # looser than dedup: a benchmark problem statement lightly edited is still a leak
    minhash: NearDuplicateConfig = NearDuplicateConfig(ngram=3, bands=20, rows=5, threshold=0.5)


class RelevantFilesConfig(StrictModel):
    token_budget: int = Field(default=16_000, gt=0)
    # tokens are estimated as chars / chars_per_token (recorded with the selection)
    chars_per_token: float = Field(default=4.0, gt=0)
    max_candidate_files: int = Field(default=3000, gt=0)
    max_file_bytes: int = Field(default=200_000, gt=0)
    max_related_files: int = Field(default=20, ge=0)
    cochange_commits: int = Field(default=300, ge=0)
    # one shared commit is chance (an initial import); bulk commits say nothing at all
    min_cochange: int = Field(default=2, ge=1)
    max_commit_files: int = Field(default=50, gt=0)
    weight_imports: float = 3.0
    weight_imported_by: float = 2.0
    weight_cochange: float = 1.5
    weight_lexical: float = 1.0
    weight_same_dir: float = 0.5
    # without a repository there are no pre-change contents; keep such pairs only if False
    require_repo: bool = True
    git_timeout_s: float = Field(default=60.0, gt=0)


class DocumentConfig(StrictModel):
    max_comments: int = Field(default=30, ge=0)
    max_comment_chars: int = Field(default=4000, gt=0)
    include_bot_comments: bool = False
    source: str = "swe_issue_pr"


class GitScanConfig(StrictModel):
    # newest commits scanned per repository (null = all)
    max_commits: int | None = Field(default=None, gt=0)
    # commits listed per merged branch (bounds huge merges)
    max_pr_commits: int = Field(default=250, gt=0)
    timeout_s: float = Field(default=300.0, gt=0)


class ReadConfig(StrictModel):
    # an event line / API response bigger than this is a reject, not parsed
    max_record_bytes: int = Field(default=20 * 2**20, gt=0)
    # a whole-JSON dump (or cassette) is loaded at once: bigger files are a reject
    max_file_bytes: int = Field(default=512 * 2**20, gt=0)
    reject_text_chars: int = Field(default=2000, ge=0)


class MiningConfig(StrictModel):
    read: ReadConfig = ReadConfig()
    git: GitScanConfig = GitScanConfig()
    link: LinkConfig = LinkConfig()
    repo_filter: RepoFilterConfig = RepoFilterConfig()
    issue_filter: IssueFilterConfig = IssueFilterConfig()
    patch_filter: PatchFilterConfig = PatchFilterConfig()
    dedup: DedupConfig = DedupConfig()
    decontaminate: DecontamConfig = DecontamConfig()
    relevant_files: RelevantFilesConfig = RelevantFilesConfig()
    document: DocumentConfig = DocumentConfig()
