import json

from swe_envs.mining.config import DocumentConfig, IssueFilterConfig
from swe_envs.mining.document import discussion, format_document, swe_instance
from swe_envs.mining.pairs import assemble_pair


def _row():
    issue = {
        "repo_name": "Acme/Widgets",
        "number": 4,
        "title": "Empty tokens",
        "body": "Parsing `a,,b` gives an empty token.",
        "author": "zoe",
        "created_at": "2020-01-02T00:00:00Z",
    }
    pull = {
        "repo_name": "Acme/Widgets",
        "number": 5,
        "title": "Skip empty tokens",
        "body": "Fixes #4",
        "author": "alice",
        "created_at": "2020-01-03T00:00:00Z",
        "merged": True,
        "merged_at": "2020-01-04T00:00:00Z",
    }
    c = lambda i, on, who, when, body, t="User": json.dumps(  # noqa: E731
        {"id": i, "author": who, "author_type": t, "created_at": when, "body": body, "kind": "comment"}
    )
    return {
        "pr_repo": "acme/widgets",
        "pr_number": 5,
        "issue_repo": "acme/widgets",
        "issue_number": 4,
        "link_kinds": ["link:pr_body", "link:git_commit_message", "link:pr_body"],
        "issue": json.dumps(issue),
        "pull": json.dumps(pull),
        "issue_links": ["acme/widgets#5"],
        "merged_prs": 1,
        "pr_links": ["acme/widgets#4", "acme/widgets#4"],
        "repo_meta": None,
        "git_repo": None,
        "issue_comments": [
            c(3, "issue", "bob", "2020-01-02T12:00:00Z", "Same here"),
            c(1, "issue", "zoe", "2020-01-02T06:00:00Z", "Any idea?"),
            c(9, "issue", "zoe", "2020-02-01T00:00:00Z", "Thanks, fixed!"),
        ],
        "pull_comments": [
            c(7, "pull", "ci-bot", "2020-01-03T01:00:00Z", "Coverage 99%", "Bot"),
            c(8, "pull", "carol", "2020-01-03T02:00:00Z", "LGTM"),
        ],
    }


def test_pair_document_and_instance():
    pair = assemble_pair(_row())
    assert pair["id"] == "acme/widgets#5:acme/widgets#4" and pair["instance_id"] == "Acme__Widgets-5"
    assert pair["link_kinds"] == ["git_commit_message", "pr_body"] and pair["flags"] == []
    comments = discussion(pair, DocumentConfig(), IssueFilterConfig())
    assert [(c["id"], c["on"]) for c in comments] == [
        (1, "issue"),
        (3, "issue"),
        (8, "pull"),
    ]  # bots, post-merge out
    diff = "diff --git a/pkg/p.py b/pkg/p.py\n--- a/pkg/p.py\n+++ b/pkg/p.py\n@@ -1 +1 @@\n-a\n+b\n"
    sel = {"method": "touched", "budget_tokens": 100, "files": [{"path": "pkg/p.py", "reason": "touched"}]}
    text = format_document(pair, [("pkg/p.py", "a\n")], sel, diff, "abc", comments, DocumentConfig())
    order = [
        "<repository",
        "<issue ",
        "<discussion>",
        '<comment on="issue"',
        "<relevant_files",
        '<file path="pkg/p.py" reason="touched">',
        "<pull_request",
        "<patch>",
        "</patch>",
    ]
    positions = [text.index(tag) for tag in order]
    assert positions == sorted(positions)
    assert (
        'base_commit="abc"' in text
        and "Any idea?" in text
        and "Coverage" not in text
        and "Thanks, fixed" not in text
    )
    inst = swe_instance(pair, diff, "", "abc", comments)
    assert inst["problem_statement"] == "Empty tokens\nParsing `a,,b` gives an empty token.\n"
    assert inst["hints_text"] == "Any idea?\n\nSame here"  # issue comments before the PR was opened
    assert inst["created_at"] == "2020-01-03T00:00:00Z" and inst["FAIL_TO_PASS"] == "[]"
    assert {
        "instance_id",
        "repo",
        "base_commit",
        "patch",
        "test_patch",
        "version",
        "environment_setup_commit",
    } <= set(inst)


def test_several_issues_per_pr_are_flagged_with_distinct_ids():
    row = _row() | {
        "pr_links": ["acme/widgets#4", "acme/widgets#6"],
        "issue_links": ["acme/widgets#5", "acme/widgets#9"],
    }
    pair = assemble_pair(row)
    assert pair["flags"] == ["issue_linked_to_several_prs", "pr_linked_to_several_issues"]
    assert pair["instance_id"] == "Acme__Widgets-5-i4"
