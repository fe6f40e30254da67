"""Repository filter (relaxed) and issue filter (strict) on real recorded issues."""

import copy

import pytest

from swe_envs.mining.config import IssueFilterConfig, RepoFilterConfig
from swe_envs.mining.language import detect_language
from swe_envs.mining.repo_issue_filters import issue_problem, repo_problem
from swe_envs.mining.text_checks import analyze, is_bot, text_problem
from tests.swe_envs.scenario import TEMPLATE, real_object

ICFG = IssueFilterConfig()


def _issue(events, url):
    return real_object(events, "IssuesEvent", url)


def _pair(issue, **pull):
    base_pull = {"author": "dev", "author_type": "User", "merged": True, "created_at": "2018-02-01T00:00:00Z"}
    return {
        "repo": "o/r",
        "issue": {
            "title": issue["title"],
            "body": issue["body"],
            "author": issue["user"]["login"],
            "author_type": issue["user"]["type"],
            "created_at": issue["created_at"],
        },
        "pull": base_pull | pull,
        "flags": [],
        "merged_prs": 1,
        "pr_linked_issues": ["o/r#1"],
        "repo_meta": None,
    }


def test_real_problem_statements_pass(events):
    for url in (
        "https://github.com/requests/toolbelt/issues/199",
        "https://github.com/PyCQA/pyflakes/issues/290",
        "https://github.com/sigmavirus24/github3.py/issues/775",
        "https://github.com/pypa/twine/issues/268",
    ):
        reason, info = issue_problem(_pair(_issue(events, url)), ICFG)
        assert reason is None, (url, info)
        assert info["language"] == "en" and info["words"] >= ICFG.min_words


def test_each_text_rule_with_its_reason(events):
    real = _issue(events, "https://github.com/requests/toolbelt/issues/199")

    def reason(title, body):
        return text_problem(analyze(title, body), 80, 12, 40_000, 0.8)

    assert reason("Bug report", TEMPLATE) == "template_only"
    assert (
        reason("crash", "See https://example.com/a/very/long/path/to/a/log/file/that/explains/everything.txt")
        == "link_only"
    )
    trace = (
        "Traceback (most recent call last):\n"
        + '  File "a.py", line 1, in <module>\n' * 8
        + "ValueError: boom\n"
    )
    assert reason("error", trace) == "stack_trace_only"
    assert reason("short", "It breaks.") == "text_too_short"
    assert reason(real["title"], real["body"] * 60) == "text_too_long"
    assert reason(real["title"], real["body"]) is None
    # a trace *with* an explanation is a fine problem statement
    assert (
        reason(
            "ValueError when parsing an empty header in the multipart decoder",
            "Parsing a response whose content-type header is empty raises instead of returning "
            "an error message that names the header.\n" + trace,
        )
        is None
    )


def test_language_of_real_and_translated_text(events):
    real = _issue(events, "https://github.com/sigmavirus24/github3.py/issues/775")
    assert detect_language(real["body"])[0] == "en"
    de = "Wenn ich die Funktion mit einem leeren Wert aufrufe, stürzt das Programm ab und es gibt keine Fehlermeldung."
    assert detect_language(de)[0] == "de"
    assert detect_language("在调用这个函数的时候程序崩溃了，没有任何错误信息")[0] == "zh"
    issue = dict(real, title="Absturz beim Aufruf", body=de * 2)
    assert issue_problem(_pair(issue), ICFG)[0] == "language_not_allowed"
    assert issue_problem(_pair(issue), IssueFilterConfig(languages=["en", "de"]))[0] is None


def test_metadata_rules_in_order(events):
    real = _issue(events, "https://github.com/requests/toolbelt/issues/199")
    assert issue_problem(_pair(real, merged=False), ICFG)[0] == "pr_not_merged"
    assert issue_problem(_pair(real, author="dependabot[bot]"), ICFG)[0] == "bot_pr_author"
    assert issue_problem(_pair(real, author="renovate", author_type="User"), ICFG)[0] == "bot_pr_author"
    bot_issue = copy.deepcopy(real)
    bot_issue["user"] = {"login": "github-actions", "type": "Bot"}
    assert issue_problem(_pair(bot_issue), ICFG)[0] == "bot_issue_author"
    assert issue_problem(_pair(real, created_at="2017-11-20T23:00:00Z"), ICFG)[0] == "pr_before_issue"
    assert issue_problem(_pair(real, created_at=None), ICFG)[0] == "created_at_unknown"
    # without API times, a git-only PR is dated by its first commit
    git_only = _pair(real, created_at=None, git={"first_commit_at": "2017-11-21T00:18:00Z"})
    assert issue_problem(git_only, ICFG)[0] is None
    several = _pair(real) | {"merged_prs": 2}
    assert issue_problem(several, ICFG)[0] == "several_merged_prs"
    multi = _pair(real) | {"pr_linked_issues": ["o/r#1", "o/r#2"]}
    assert issue_problem(multi, ICFG)[0] is None
    assert (
        issue_problem(multi, IssueFilterConfig(reject_pr_with_several_issues=True))[0]
        == "pr_links_several_issues"
    )
    cross = _pair(real) | {"flags": ["cross_repo"]}
    assert issue_problem(cross, IssueFilterConfig(allow_cross_repo=False))[0] == "cross_repo_link"


@pytest.mark.parametrize(
    "meta, cfg, expected",
    [
        (None, RepoFilterConfig(), None),
        (None, RepoFilterConfig(allow_unknown_metadata=False), "repo_metadata_unknown"),
        ({"fork": True, "stars": 100}, RepoFilterConfig(), "fork"),
        ({"archived": True}, RepoFilterConfig(), "archived"),
        ({"stars": 3}, RepoFilterConfig(min_stars=5), "too_few_stars"),
        ({"stars": 3}, RepoFilterConfig(), None),
        ({"stars": 50, "license": "GPL-3.0"}, RepoFilterConfig(), "license_not_allowed"),
        ({"stars": 50, "license": "GPL-3.0"}, RepoFilterConfig(allowed_licenses=None), None),
        ({"stars": 50, "license": "mit"}, RepoFilterConfig(), None),
        ({"stars": 50, "license": "OTHER"}, RepoFilterConfig(), None),
        ({"stars": 50, "license": None}, RepoFilterConfig(allow_unknown_license=False), "license_unknown"),
    ],
)
def test_repo_filter(meta, cfg, expected):
    assert repo_problem({"repo": "o/r", "repo_meta": meta}, cfg) == expected
    assert (
        repo_problem({"repo": "o/r", "repo_meta": meta}, RepoFilterConfig(exclude_repos=["O/R"]))
        == "excluded_repo"
    )


def test_bots():
    assert is_bot("dependabot[bot]", "Bot", [], [])
    assert is_bot("my-ci-bot", "User", [], [r"[-_]bot$"])
    assert not is_bot("abbot", "User", ICFG.bot_logins, ICFG.bot_login_patterns)
    assert not is_bot(None, None, ICFG.bot_logins, ICFG.bot_login_patterns)
