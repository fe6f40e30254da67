"""Events and API dumps -> observations, on the real github3.py recordings."""

import copy
import gzip
import json
from collections import Counter

from swe_envs.mining.api_dumps import object_observations, read_api_dump
from swe_envs.mining.config import ReadConfig
from swe_envs.mining.events import parse_event_line, read_events
from swe_envs.mining.observations import Bad

CFG = ReadConfig()


def _pr_event(events, url):
    return next(
        e
        for e in events
        if e["type"] == "PullRequestEvent" and e["payload"]["pull_request"]["html_url"] == url
    )


def test_every_cassette_parses_into_observations_or_counted_rejects(cassettes):
    kinds, reasons, records = Counter(), Counter(), 0
    for path in sorted(cassettes.glob("*.json")):
        for rid, result in read_api_dump(str(path), f"api:{path.name}", CFG):
            records += 1
            assert rid.startswith(f"api:{path.name}")
            if isinstance(result, Bad):
                reasons[result.reason] += 1
            else:
                assert result, f"{rid} gave neither observations nor a reject"
                kinds.update(o.kind for o in result)
    assert len(list(cassettes.glob("*.json"))) > 350 and records > 5000
    assert kinds["issue"] > 100 and kinds["pull"] > 100 and kinds["comment"] > 100 and kinds["repo"] > 100
    assert kinds["link:pr_body"] > 10 and kinds["link:pr_title"] > 0 and kinds["pr_commit"] > 10
    assert {"unsupported_object", "http_error", "non_json_response"} <= set(reasons)


def test_cassette_context_attributes_files_and_diffs(cassettes):
    obs = [
        o
        for _, r in read_api_dump(str(cassettes / "PullRequest_files.json"), "f", CFG)
        if not isinstance(r, Bad)
        for o in r
    ]
    files = [o for o in obs if o.payload and "api_files" in o.payload]
    assert files and files[0].key == "sigmavirus24/github3.py#235"
    assert {f["filename"] for f in files[0].payload["api_files"]} >= {"github3/repos/release.py"}
    diffs = [
        o
        for _, r in read_api_dump(str(cassettes / "PullRequest_diff.json"), "d", CFG)
        if not isinstance(r, Bad)
        for o in r
        if o.payload and "api_diff" in o.payload
    ]
    assert diffs and diffs[0].payload["api_diff"].startswith("diff --git a/github3/repos/release.py")


def test_real_pull_request_event(events):
    e = _pr_event(events, "https://github.com/requests/toolbelt/pull/200")
    obs = parse_event_line(json.dumps(e).encode(), "events", CFG)
    by_kind = {o.kind: o for o in obs}
    pull = by_kind["pull"]
    assert (pull.repo, pull.number, pull.payload["merged"]) == ("requests/toolbelt", 200, True)
    assert pull.payload["merged_at"] == "2017-11-21T00:39:08Z" and pull.payload["author"] == "Kefevs"
    link = by_kind["link:pr_body"]
    assert (link.ref_repo, link.ref_number) == ("requests/toolbelt", 199)
    assert by_kind["repo"].payload["stars"] > 100 and by_kind["repo"].payload["fork"] is False
    title_link = parse_event_line(
        json.dumps(_pr_event(events, "https://github.com/sigmavirus24/github3.py/pull/776")).encode(),
        "events",
        CFG,
    )
    assert [(o.ref_number) for o in title_link if o.kind == "link:pr_title"] == [775]


def test_issue_comment_on_a_pull_request_is_a_pull_observation(events):
    e = next(
        e for e in events if e["type"] == "IssueCommentEvent" and "pull_request" in e["payload"]["issue"]
    )
    obs = parse_event_line(json.dumps(e).encode(), "events", CFG)
    assert obs[0].kind == "pull" and obs[-1].kind == "comment" and obs[-1].payload["on"] == "pull"
    assert obs[-1].number == obs[0].number


def test_older_and_newer_api_versions(events, unit_json):
    enterprise = object_observations(json.loads((unit_json / "issue_enterprise").read_text()))
    assert enterprise[0].kind == "issue" and enterprise[0].repo == "sigmavirus24/github3.py"
    old_repo = object_observations(json.loads((unit_json / "repo_2_12_example").read_text()))[0]
    assert old_repo.kind == "repo" and isinstance(old_repo.payload["stars"], int)
    issue = copy.deepcopy(next(e["payload"]["issue"] for e in events if e["type"] == "IssuesEvent"))
    body = issue.pop("body")
    issue["body_html"] = "<p>" + body.replace("&", "&amp;").replace("<", "&lt;") + "</p>"
    assert object_observations(issue)[0].payload["body"].strip() == body.strip()
    pull = copy.deepcopy(
        _pr_event(events, "https://github.com/requests/toolbelt/pull/200")["payload"]["pull_request"]
    )
    del pull["merged"]  # older pull objects: merged_at decides
    assert object_observations(pull)[0].payload["merged"] is True
    repo = {"full_name": "a/b", "fork": False, "watchers": 7}  # the pre-2012 star count
    assert object_observations(repo)[0].payload["stars"] == 7
    old_event = {
        "type": "IssuesEvent",
        "repository": {"owner": "a", "name": "b"},
        "actor": "x",
        "created_at": "2012/03/12 12:34:56 -0700",
        "payload": {"action": "opened", "issue": 12345},
    }
    bad = parse_event_line(json.dumps(old_event).encode(), "events", CFG)
    assert isinstance(bad, Bad) and bad.reason == "missing_field" and bad.detail == "payload.issue"


def test_bad_event_lines_are_counted_with_reasons(tmp_path, events):
    good = [json.dumps(e).encode() for e in events[:40]]
    lines = good[:5] + [
        b"{broken",
        b"[1]",
        b'{"type": "NoSuchEvent", "payload": {}}',
        b'{"type": "WatchEvent"}',
        b'{"type": "IssuesEvent", "payload": {}}',
        b'{"type": "PushEvent", "payload": {}}',
        b'{"type": "IssuesEvent", "x": "\xff"}',
        b"",
        *good[5:],
    ]
    path = tmp_path / "2017-11-21-0.json.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    out = list(read_events(str(path), "events:x", CFG))
    reasons = Counter(r.reason for _, r in out if isinstance(r, Bad))
    assert reasons["malformed_json"] == 2 and reasons["unknown_event_type"] == 1
    assert reasons["missing_field"] == 1 and reasons["undecodable"] == 1
    assert len(out) == len(lines) - 1  # the blank line is not a record
    assert out[5][0] == "events:x#L6"
    truncated = tmp_path / "2017-11-21-1.json.gz"
    truncated.write_bytes(path.read_bytes()[:-200])
    cut = list(read_events(str(truncated), "events:t", CFG))
    assert isinstance(cut[-1][1], Bad) and cut[-1][1].reason == "truncated_gzip"
    assert 0 < len(cut) <= len(out)
    huge = parse_event_line(
        b'{"type": "IssuesEvent"}' + b" " * 100, "events", ReadConfig(max_record_bytes=50)
    )
    assert huge.reason == "record_too_large"


def test_api_dump_shapes(tmp_path, unit_json):
    issue = json.loads((unit_json / "issue_137").read_text())
    (tmp_path / "one.json").write_text(json.dumps(issue))
    (tmp_path / "search.json").write_text(json.dumps({"total_count": 1, "items": [issue]}))
    (tmp_path / "lines.jsonl").write_text(
        json.dumps(issue) + "\n{oops\n" + json.dumps([issue, {"x": 1}]) + "\n[]\n"
    )
    (tmp_path / "empty.json").write_text('{"total_count": 0, "items": []}')
    (tmp_path / "milestone.json").write_text((unit_json / "milestone_example").read_text())
    (tmp_path / "file.json").write_text((unit_json / "pull_file_example").read_text())

    def results(name):
        return [r for _, r in read_api_dump(str(tmp_path / name), name, CFG)]

    assert (
        results("one.json")[0][0].kind == "issue" and results("search.json")[0][0].number == issue["number"]
    )
    lines = results("lines.jsonl")
    assert [type(r).__name__ for r in lines] == ["list", "Bad", "list", "Bad", "Bad"]
    assert lines[1].reason == "malformed_json" and lines[3].reason == "unsupported_object"
    # an empty page is accounted for, not silently nothing
    assert lines[4].reason == "empty_list" and results("empty.json")[0].reason == "empty_list"
    assert results("milestone.json")[0].reason == "unsupported_object"
    assert results("file.json")[0].reason == "unattributable_object"
