"""Small real git repositories for the tests, built with the git CLI."""

from __future__ import annotations

from pathlib import Path

from samples.swe_mine.gitrepo import commit_files, git, init_repo, merge_pr

SRC = '''"""The parser."""

from pkg.util import clean


def parse(text):
    return [clean(t) for t in text.split(",")]
'''
UTIL = """def clean(token):
    return token.strip()
"""
TEST = """from pkg.parser import parse


def test_parse():
    assert parse("a, b") == ["a", "b"]
"""


def project(root: Path, origin: str | None = "acme/widgets") -> Path:
    """main: base commit; PR #5 (merge commit, closes #4 and acme/other#9 in a branch commit);
    PR #7 squash-merged, closing #6; a direct commit closing #3; PR #8 merged by bors."""
    repo = init_repo(root, origin)
    commit_files(
        repo,
        {
            "pkg/__init__.py": "",
            "pkg/parser.py": SRC,
            "pkg/util.py": UTIL,
            "tests/test_parser.py": TEST,
            "README.md": "# widgets\n",
        },
        "Initial import",
        "2020-01-01T00:00:00Z",
    )
    commit_files(
        repo, {"README.md": "# widgets\n\nParsing.\n"}, "Document parsing, closes #3", "2020-01-02T00:00:00Z"
    )
    git(repo, "checkout", "-q", "-b", "empty-tokens")
    commit_files(
        repo,
        {"pkg/parser.py": SRC.replace('text.split(",")]', 'text.split(",") if t.strip()]')},
        "Skip empty tokens\n\nFixes #4, closes acme/other#9",
        "2020-01-03T00:00:00Z",
        "alice",
    )
    commit_files(
        repo,
        {"tests/test_parser.py": TEST + '\n\ndef test_empty():\n    assert parse("a,,b") == ["a", "b"]\n'},
        "Test empty tokens",
        "2020-01-03T01:00:00Z",
        "alice",
    )
    merge_pr(repo, "empty-tokens", 5, "alice", "Skip empty tokens", "2020-01-04T00:00:00Z")
    commit_files(
        repo,
        {
            "pkg/util.py": UTIL.replace("strip()", "strip().lower()"),
            "tests/test_util.py": "from pkg.util import clean\n\n\ndef test_lower():\n    assert clean(' A') == 'a'\n",
        },
        "Lower-case tokens (#7)\n\nResolves #6",
        "2020-01-05T00:00:00Z",
        "bob",
    )
    git(repo, "checkout", "-q", "-b", "bors-branch")
    commit_files(
        repo,
        {"pkg/util.py": UTIL.replace("strip()", "strip().lower()") + "\n# bors\n"},
        "tweak",
        "2020-01-06T00:00:00Z",
        "carol",
    )
    git(repo, "checkout", "-q", "main")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge #8\n\n8: tweak r=dave",
        "bors-branch",
        when="2020-01-06T01:00:00Z",
    )
    return repo
