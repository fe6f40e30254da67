"""A mining scenario built from real recorded GitHub objects (github3.py's cassettes).

Real inputs: every event recorded in the cassettes (as hourly GH-Archive files), a subset of
the cassettes as API dumps, the sample clones of the three real issue→PR pairs. Derived
inputs (real issue texts and the real requests/toolbelt PR #200 object, renumbered, plus git
history built with ``git``) make each filter fire at least once:

* #210/#211: near-duplicate of issue #199 fixed by PR #211     -> dedup: duplicate_issue
* #220 fixed by both #221 and #222 (both merged)                 -> issue_filter: several_merged_prs
* #230 fixed by PR #231 from dependabot[bot]                     -> issue_filter: bot_pr_author
* #240 an untouched issue template                               -> issue_filter: template_only
* #250 opened after its fix PR #251                              -> issue_filter: pr_before_issue
* #260 fixed by a README-only PR #261                            -> patch_filter: no_test_change
* #270 fixed by PR #271 that also adds a PNG                     -> patch_filter: binary_diff
* #280 fixed by PR #281 whose merge commit is not in the clone   -> patch_filter: commit_missing
* #300 fixed by PR #301 in a fork (Kefevs/toolbelt)              -> repo_filter: fork
* a benchmark paraphrasing github3.py #775                       -> decontaminate
Bad input: a truncated gzip, malformed / unknown / incomplete event lines, a corrupt API dump,
an API object missing its number, an empty git repository.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

from samples.swe_mine.gitrepo import commit_files, git, merge_pr
from samples.swe_mine.recordings import recorded_events, write_hourly_events
from samples.swe_mine.repos import build_repos

TOOLBELT = "requests/toolbelt"
API_SUBSET = (
    "Issue_",
    "PullRequest_",
    "Repository_events",
    "User_events",
    "GitHub_issue",
    "Repository_issue",
)
TEMPLATE = (
    "<!-- Thanks for reporting! Please fill in the sections below. -->\r\n\r\n## Expected Result\r\n\r\n"
    "<!-- What you expected. -->\r\n\r\n## Actual Result\r\n\r\n<!-- What happened instead. -->\r\n\r\n"
    "## Reproduction Steps\r\n\r\n```python\r\nimport requests\r\n```\r\n\r\n## System Information\r\n\r\n"
    "- [ ] I have searched the existing issues\r\n- [ ] I am on the latest version\r\n"
)


def real_object(events: list[dict[str, Any]], etype: str, url: str) -> dict[str, Any]:
    key = "pull_request" if etype == "PullRequestEvent" else "issue"
    found = [e["payload"][key] for e in events if e["type"] == etype and e["payload"][key]["html_url"] == url]
    if not found:
        raise LookupError(f"no {etype} for {url} in the recordings")
    return copy.deepcopy(found[-1])


def _renumber(obj: dict[str, Any], old: int, new: int) -> dict[str, Any]:
    text = json.dumps(obj)
    for part in ("issues", "pulls", "pull"):
        text = text.replace(f"/{part}/{old}", f"/{part}/{new}")
    out = json.loads(text)
    out["number"] = new
    out["id"] = out["id"] * 1000 + new
    return out


def derived_issue(base: dict[str, Any], number: int, created: str, title: str, body: str) -> dict[str, Any]:
    """``base`` (a real issue of any repository) as issue ``number`` of requests/toolbelt."""
    origin = base["html_url"].split("/issues/")[0].split("github.com/")[1]
    base = json.loads(re.sub(rf"/{re.escape(origin)}(?=[/\"])", f"/{TOOLBELT}", json.dumps(base)))
    issue = _renumber(base, base["number"], number)
    issue.update(title=title, body=body, created_at=created, updated_at=created, state="closed")
    return issue


def derived_pull(
    base: dict[str, Any],
    number: int,
    created: str,
    merged: str | None,
    body: str,
    login: str = "Kefevs",
    user_type: str = "User",
    merge_sha: str | None = None,
) -> dict[str, Any]:
    pull = _renumber(base, base["number"], number)
    pull.update(
        title=f"Fix for PR {number}",
        body=body,
        created_at=created,
        updated_at=merged or created,
        merged_at=merged,
        merged=merged is not None,
        merge_commit_sha=merge_sha,
        closed_at=merged or created,
        state="closed",
    )
    pull["user"] = dict(pull["user"], login=login, type=user_type)
    pull["head"] = dict(pull["head"], sha=None)
    return pull


def event(etype: str, obj: dict[str, Any], when: str, eid: int) -> dict[str, Any]:
    key = "pull_request" if etype == "PullRequestEvent" else "issue"
    action = "closed" if etype == "PullRequestEvent" else "opened"
    return {
        "id": str(eid),
        "type": etype,
        "actor": {"login": obj["user"]["login"]},
        "repo": {"name": TOOLBELT, "url": f"https://api.github.com/repos/{TOOLBELT}"},
        "payload": {"action": action, key: obj},
        "public": True,
        "created_at": when,
    }


def _pr_branch(
    repo: Path, number: int, files: dict[str, str | bytes], when: str, user: str = "Kefevs"
) -> str:
    branch = f"pr-{number}"
    git(repo, "checkout", "-q", "-b", branch, "main")
    text_files = {k: v for k, v in files.items() if isinstance(v, str)}
    for k, v in files.items():
        if isinstance(v, bytes):
            (repo / k).parent.mkdir(parents=True, exist_ok=True)
            (repo / k).write_bytes(v)
            git(repo, "add", k)
    commit_files(repo, text_files, f"Work for #{number}", when, user)
    return merge_pr(repo, branch, number, user, f"Fix for PR {number}", when.replace("T00", "T06"))


def build_scenario(cassettes: Path, root: Path) -> dict[str, Any]:
    events = recorded_events(cassettes)
    issue199 = real_object(events, "IssuesEvent", "https://github.com/requests/toolbelt/issues/199")
    pull200 = real_object(events, "PullRequestEvent", "https://github.com/requests/toolbelt/pull/200")
    texts = {
        n: real_object(events, "IssuesEvent", f"https://github.com/{u}")
        for n, u in (
            (220, "pypa/twine/issues/268"),
            (230, "requests/requests/issues/4389"),
            (250, "requests/requests/issues/4407"),
            (260, "pypa/twine/issues/281"),
            (270, "requests/requests/issues/4419"),
            (280, "requests/toolbelt/issues/189"),
        )
    }
    repos = root / "repos"
    build_repos(repos)
    tb = repos / "requests" / "toolbelt"
    dec, test = "requests_toolbelt/multipart/decoder.py", "tests/test_multipart_decoder.py"

    def change(n: int) -> dict[str, str]:
        return {
            dec: (tb / dec).read_text() + f"\n# handles case {n}\n",
            test: (tb / test).read_text() + f"\n\ndef test_case_{n}():\n    assert {n}\n",
        }

    derived: list[dict[str, Any]] = []
    eid = 90_000_000_000

    def add(etype: str, obj: dict[str, Any], when: str) -> None:
        nonlocal eid
        eid += 1
        derived.append(event(etype, obj, when, eid))

    dup_body = issue199["body"] + "\r\n\r\nI see the same with Multipart/Mixed responses from that server."
    add(
        "IssuesEvent",
        derived_issue(issue199, 210, "2017-12-01T10:00:00Z", issue199["title"], dup_body),
        "2017-12-01T10:00:00Z",
    )
    _pr_branch(tb, 211, change(211), "2017-12-03T00:10:00Z")
    add(
        "PullRequestEvent",
        derived_pull(pull200, 211, "2017-12-02T10:00:00Z", "2017-12-03T06:10:00Z", "Closes #210"),
        "2017-12-03T06:10:00Z",
    )
    for n, src in texts.items():
        add(
            "IssuesEvent",
            derived_issue(src, n, f"2017-12-{n // 10 - 10:02d}T08:00:00Z", src["title"], src["body"]),
            f"2017-12-{n // 10 - 10:02d}T08:00:00Z",
        )
    day = "2017-12-{:02d}T{}"
    for pr in (221, 222):
        _pr_branch(tb, pr, change(pr), day.format(13, "00:20:00Z"))
        add(
            "PullRequestEvent",
            derived_pull(pull200, pr, day.format(12, "09:00:00Z"), day.format(13, "06:20:00Z"), "Fixes #220"),
            day.format(13, "06:20:00Z"),
        )
    _pr_branch(tb, 231, change(231), day.format(14, "00:30:00Z"), user="dependabot[bot]")
    add(
        "PullRequestEvent",
        derived_pull(
            pull200,
            231,
            day.format(13, "20:00:00Z"),
            day.format(14, "06:30:00Z"),
            "Fixes #230",
            login="dependabot[bot]",
            user_type="Bot",
        ),
        day.format(14, "06:30:00Z"),
    )
    add(
        "IssuesEvent",
        derived_issue(issue199, 240, day.format(5, "08:00:00Z"), "Bug report", TEMPLATE),
        day.format(5, "08:00:00Z"),
    )
    _pr_branch(tb, 241, change(241), day.format(6, "00:40:00Z"))
    add(
        "PullRequestEvent",
        derived_pull(pull200, 241, day.format(5, "09:00:00Z"), day.format(6, "06:40:00Z"), "Fixes #240"),
        day.format(6, "06:40:00Z"),
    )
    _pr_branch(tb, 251, change(251), day.format(16, "00:50:00Z"))
    add(
        "PullRequestEvent",
        derived_pull(pull200, 251, day.format(14, "09:00:00Z"), day.format(16, "06:50:00Z"), "Fixes #250"),
        day.format(16, "06:50:00Z"),
    )
    _pr_branch(
        tb,
        261,
        {"README.rst": (tb / "README.rst").read_text() + "\nMore docs.\n"},
        day.format(17, "00:55:00Z"),
    )
    add(
        "PullRequestEvent",
        derived_pull(pull200, 261, day.format(16, "09:00:00Z"), day.format(17, "06:55:00Z"), "Fixes #260"),
        day.format(17, "06:55:00Z"),
    )
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    _pr_branch(tb, 271, {**change(271), "docs/logo.png": png}, day.format(18, "00:58:00Z"))
    add(
        "PullRequestEvent",
        derived_pull(pull200, 271, day.format(17, "09:00:00Z"), day.format(18, "06:58:00Z"), "Fixes #270"),
        day.format(18, "06:58:00Z"),
    )
    add(
        "PullRequestEvent",
        derived_pull(
            pull200,
            281,
            day.format(18, "09:00:00Z"),
            day.format(19, "06:00:00Z"),
            "Fixes #280",
            merge_sha="0123456789abcdef0123456789abcdef01234567",
        ),
        day.format(19, "06:00:00Z"),
    )
    git(tb, "checkout", "-q", "main")
    fork = "Kefevs/toolbelt"

    def rehome(obj: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(obj).replace(f"/{TOOLBELT}", f"/{fork}").replace(f'"{TOOLBELT}"', f'"{fork}"')
        return json.loads(text)

    fork_issue = rehome(
        derived_issue(
            texts[280],
            300,
            day.format(20, "08:00:00Z"),
            "Timeouts are ignored by the streaming upload adapter",
            real_object(events, "IssuesEvent", "https://github.com/requests/requests/issues/4413")["body"],
        )
    )
    fork_pull = rehome(
        derived_pull(pull200, 301, day.format(20, "09:00:00Z"), day.format(21, "06:00:00Z"), "Fixes #300")
    )
    fork_pull["base"]["repo"]["fork"] = True
    add("IssuesEvent", fork_issue, day.format(20, "08:00:00Z"))
    add("PullRequestEvent", fork_pull, day.format(21, "06:00:00Z"))

    ev_dir = root / "events"
    write_hourly_events(events, ev_dir)
    write_hourly_events(derived, ev_dir / "derived")
    bad = ev_dir / "bad"
    bad.mkdir()
    whole = sorted(ev_dir.glob("*.json.gz"), key=lambda p: p.stat().st_size)[-1].read_bytes()
    (bad / "2018-02-01-0.json.gz").write_bytes(whole[: len(whole) * 2 // 3])
    lines = [
        b'{"id": "1", "type": "IssuesEvent", "payload": {"action": "opened"}}',
        b"{not json",
        b'{"id": "2", "type": "FancyNewEvent", "payload": {}}',
        b"[1, 2, 3]",
        b'{"id": "3", "type": "\xff\xfe"}',
    ]
    with gzip.open(bad / "2018-02-01-1.json.gz", "wb") as fh:
        fh.write(b"\n".join(lines) + b"\n")

    api = root / "api"
    api.mkdir()
    for p in sorted(cassettes.glob("*.json")):
        if p.name.startswith(API_SUBSET):
            shutil.copy(p, api / p.name)
    unit_json = cassettes.parent / "unit_json"
    old = [
        json.loads((unit_json / n).read_text())
        for n in ("issue_enterprise", "issue_137", "repo_2_12_example")
    ]
    (api / "older_api_versions.json").write_text(json.dumps(old))
    (api / "corrupt.json").write_text(json.dumps(old)[:500])
    no_number = {k: v for k, v in json.loads((unit_json / "issue_137").read_text()).items() if k != "number"}
    (api / "partial.jsonl").write_text(json.dumps(no_number) + "\n")
    empty = repos / "broken" / "empty"
    empty.mkdir(parents=True)
    git(empty, "init", "-q")

    issue775 = real_object(events, "IssuesEvent", "https://github.com/sigmavirus24/github3.py/issues/775")
    words = f"{issue775['title']}\n{issue775['body']}".split()
    paraphrase = " ".join(words[:-6] + ["Please", "fix", "this", "in", "the", "client."])
    bench = root / "benchmark.jsonl"
    bench.write_text(
        json.dumps(
            {"instance_id": "someone__else-1", "repo": "someone/else", "problem_statement": paraphrase}
        )
        + "\n"
    )
    return {"events": ev_dir, "api": api, "repos": repos, "benchmark": bench}
