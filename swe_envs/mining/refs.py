"""References between issues, pull requests and commits, as GitHub writes them.

* Closing keywords (GitHub docs "Linking a pull request to an issue"): close/closes/closed,
  fix/fixes/fixed, resolve/resolves/resolved, any case, optionally followed by a colon,
  then ``#N``, ``owner/repo#N`` or an issue URL. Each reference needs its own keyword
  (``Fixes #1, fixes #2``), as on GitHub. Text inside code spans/blocks does not link.
* Pull-request commits on the default branch: GitHub merge commits
  ``Merge pull request #N from owner/branch``, squash commits ``Title (#N)`` and the bors /
  homu merge bots (``Merge #N``, ``Auto merge of #N``).
* Repository names from API URLs (``/repos/owner/name/...``, GitHub Enterprise included).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_KEYWORDS = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_OWNER_REPO = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}"
_CLOSING = re.compile(
    rf"(?<![\w/-]){_KEYWORDS}:?\s+"
    rf"(?:(?P<repo>{_OWNER_REPO})?#(?P<num>\d{{1,9}})"
    rf"|https?://github\.com/(?P<urlrepo>{_OWNER_REPO})/issues/(?P<urlnum>\d{{1,9}}))"
    r"(?![\w-])",
    re.IGNORECASE,
)
_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)

# PR numbers are GitHub's (far below 10^9, as in _CLOSING): a longer run of digits in a subject
# is not a PR, and would not fit the int64 number column
_MERGE_PR = re.compile(r"^Merge pull request #(\d{1,9}) from (\S+)")
_BORS = re.compile(r"^(?:Auto merge of|Merge) #(\d{1,9})\b")
_SQUASH = re.compile(r"\(#(\d{1,9})\)\s*$")

_API_REPO = re.compile(r"/repos/([^/\s]+/[^/\s?#]+)")
_HTML_REPO = re.compile(r"^https?://[^/\s]+/([^/\s]+/[^/\s?#]+)/(?:issues|pull|pulls)/\d+")
_GIT_REMOTE = re.compile(r"github\.com[:/]+([^/\s]+/[^/\s]+?)(?:\.git)?/?$")


def repo_key(name: str) -> str:
    """GitHub repository names are case-insensitive: keys are lower case."""
    return name.strip().lower()


def strip_code(text: str) -> str:
    """Remove fenced blocks, inline code and HTML comments (they never create links)."""
    text = _FENCED.sub(" ", text)
    text = _HTML_COMMENT.sub(" ", text)
    return _INLINE_CODE.sub(" ", text)


def closing_refs(text: str | None, default_repo: str) -> list[tuple[str, int]]:
    """(repo, number) of every issue ``text`` closes, in order of appearance, without repeats."""
    if not text:
        return []
    out: list[tuple[str, int]] = []
    for m in _CLOSING.finditer(strip_code(text)):
        repo = m.group("repo") or m.group("urlrepo") or default_repo
        num = int(m.group("num") or m.group("urlnum"))
        ref = (repo_key(repo), num)
        if num > 0 and ref not in out:
            out.append(ref)
    return out


def pr_number_from_commit(subject: str, n_parents: int) -> tuple[int, str] | None:
    """(PR number, how) if a commit subject says which PR it merged, else None."""
    subject = subject.strip()
    if n_parents >= 2:
        m = _MERGE_PR.match(subject) or _BORS.match(subject)
        if m:
            return int(m.group(1)), "merge"
        return None
    if n_parents == 1:
        m = _SQUASH.search(subject)
        if m:
            return int(m.group(1)), "squash"
        m = _BORS.match(subject)
        if m:
            return int(m.group(1)), "squash"
    return None


def repo_from_url(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    m = _API_REPO.search(url) or _HTML_REPO.match(url)
    return m.group(1) if m else None


def repo_from_remote(url: str) -> str | None:
    m = _GIT_REMOTE.search(url.strip())
    return m.group(1) if m else None


_CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_TIME_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%z",
    "%Y-%m-%dT%H:%M:%S.%f%z",
    "%Y/%m/%d %H:%M:%S %z",
    "%Y-%m-%d %H:%M:%S%z",
)


def iso_utc(value: object) -> str | None:
    """Normalise the timestamp spellings of API versions and old GH Archive to ``…Z`` UTC."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):  # a hand-made commit dated past year 9999, NaN
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    if _CANONICAL_TIME.fullmatch(value):  # what the REST API sends: nothing to convert
        return value
    raw = value.strip().replace("Z", "+00:00") if value.strip().endswith("Z") else value.strip()
    for fmt in _TIME_FORMATS:
        try:
            dt = datetime.strptime(raw, fmt)
        except ValueError:
            continue
        return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
