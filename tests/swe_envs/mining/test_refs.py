import pytest

from swe_envs.mining.refs import closing_refs, iso_utc, pr_number_from_commit, repo_from_remote, repo_from_url


@pytest.mark.parametrize(
    "kw", ["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"]
)
def test_every_github_closing_keyword_any_case(kw):
    assert closing_refs(f"This {kw.upper()} #12 for good", "o/r") == [("o/r", 12)]
    assert closing_refs(f"{kw.capitalize()}: #7", "o/r") == [("o/r", 7)]


def test_cross_repo_urls_order_and_repeats():
    text = "Fixes #1, fixes Other/Repo#2 and resolves https://github.com/a-b/c.d/issues/3; fixes #1 again"
    assert closing_refs(text, "Me/Repo") == [("me/repo", 1), ("other/repo", 2), ("a-b/c.d", 3)]


def test_non_closing_text_and_code_do_not_link():
    assert closing_refs("see #4; prefix #5; fixes#6; bugfix #7; fixes #8abc", "o/r") == []
    assert closing_refs("`fixes #9` and\n```\nfixes #10\n```\n<!-- closes #11 -->", "o/r") == []
    assert closing_refs("Fixes a crash (see #3)", "o/r") == []
    assert closing_refs(None, "o/r") == []


def test_pr_commits_merge_squash_bors():
    assert pr_number_from_commit("Merge pull request #200 from Kefevs/bug/199", 2) == (200, "merge")
    assert pr_number_from_commit("Merge pull request #200 from Kefevs/bug/199", 1) is None
    assert pr_number_from_commit("Fix #775: Wrong rate limit returned for `search` (#776)", 1) == (
        776,
        "squash",
    )
    assert pr_number_from_commit("Auto merge of #4521 - foo:bar, r=baz", 2) == (4521, "merge")
    assert pr_number_from_commit("Merge #77", 1) == (77, "squash")
    assert pr_number_from_commit("Merge branch 'main' into feature", 2) is None
    assert pr_number_from_commit("Refactor (#12) the parser", 1) is None


def test_repo_names_from_urls_and_remotes():
    assert (
        repo_from_url("https://api.github.com/repos/sigmavirus24/github3.py/issues/775")
        == "sigmavirus24/github3.py"
    )
    assert repo_from_url("https://ghe.example.com/api/v3/repos/org/proj/pulls/3/files") == "org/proj"
    assert repo_from_url("https://github.com/PyCQA/pyflakes/pull/313") == "PyCQA/pyflakes"
    assert repo_from_url("https://github.com/PyCQA/pyflakes") is None
    assert repo_from_remote("git@github.com:psf/requests.git") == "psf/requests"
    assert repo_from_remote("https://github.com/psf/requests") == "psf/requests"
    assert repo_from_remote("https://gitlab.com/psf/requests.git") is None


def test_timestamps_of_every_api_version():
    assert iso_utc("2018-01-26T09:34:26Z") == "2018-01-26T09:34:26Z"
    assert iso_utc("2012/03/12 12:34:56 -0700") == "2012-03-12T19:34:56Z"  # GH Archive before 2015
    assert iso_utc("2018-01-26T10:34:26+01:00") == "2018-01-26T09:34:26Z"
    assert iso_utc(1516959266) == "2018-01-26T09:34:26Z"
    assert iso_utc("yesterday") is None and iso_utc(None) is None and iso_utc(True) is None
