"""Fuzzing the issue-PR miner's parsers: GH-Archive event lines and GitHub API dumps/cassettes.

Inputs are real recorded GitHub objects (github3.py's cassettes, downloaded once into the cache)
with fields replaced by arbitrary JSON or deleted, plus raw garbage. Properties: nothing raises;
every line / object / interaction gives exactly one result (observations or a Bad with a reason);
every observation row is writable (JSON, valid UTF-8).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.cache import cache_dir
from swe_envs.mining.api_dumps import _guard, object_observations, read_api_dump
from swe_envs.mining.config import ReadConfig
from swe_envs.mining.events import parse_event_line, read_events
from swe_envs.mining.observations import Bad
from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import DEEP, JSON, RAW, mutated

ROOT = Path(__file__).resolve().parents[2]
CFG = ReadConfig()


def _samples():
    """Real events (recorded, plus Issues/PullRequest events wrapping recorded API objects) and
    real API objects, loaded once (hypothesis strategies are built at import time)."""
    from samples.swe_mine.recordings import cassette_bodies, obtain_cassettes, recorded_events
    from tests.swe_envs.scenario import event

    cassettes = obtain_cassettes(cache_dir())
    events = recorded_events(cassettes)[:40]
    objects, files = [], []
    for name in ("GitHub_issue.json", "Issue_comment.json", "Issue_edit_both_assignee_and_assignees.json"):
        files.append(json.loads((cassettes / name).read_text()))
    for path in sorted(cassettes.glob("PullRequest*.json"))[:12] + sorted(cassettes.glob("Issue*.json"))[:12]:
        for _, body in cassette_bodies(path):
            for item in body if isinstance(body, list) else [body]:
                if isinstance(item, dict):
                    objects.append(item)
    for i, obj in enumerate(objects):
        if isinstance(obj.get("user"), dict) and isinstance(obj.get("number"), int):
            etype = "PullRequestEvent" if "head" in obj else "IssuesEvent"
            events.append(event(etype, obj, "2018-01-26T09:00:00Z", 10_000 + i))
    return events, objects[:60], files


EVENTS, OBJECTS, CASSETTES = _samples()


def check_result(result, rid: str) -> int:
    """A list of observations whose rows write as UTF-8 JSON, or a Bad with a reason."""
    if isinstance(result, Bad):
        assert result.reason and isinstance(result.reason, str)
        json.dumps({"detail": result.detail, "text": result.text, **result.meta}, ensure_ascii=False,
                   default=str).encode("utf-8")
        return 1
    assert isinstance(result, list)
    for obs in result:
        json.dumps(obs.row(rid), ensure_ascii=False).encode("utf-8")
    return 0


@st.composite
def event_line(draw) -> tuple[bytes, bool]:
    kind = draw(st.sampled_from(["real", "mutated", "mutated", "mutated", "json", "raw", "deep"]))
    if kind == "real":
        return json.dumps(draw(st.sampled_from(EVENTS))).encode(), False
    if kind == "mutated":
        value, _ = draw(mutated(EVENTS))
        return json.dumps(value).encode(), True
    if kind == "json":
        return json.dumps(draw(JSON)).encode(), True
    if kind == "deep":
        return draw(DEEP).encode(), True
    return draw(RAW).replace(b"\n", b" "), True


@pytest.mark.area("mining: GH-Archive events")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=60)
@given(line=event_line())
def test_event_lines_parse_or_reject(line):
    raw, fault = line
    result = parse_event_line(raw, "events", CFG)
    check_result(result, "fuzz#L1")
    LEDGER.add("mining: GH-Archive events", tried=1, faults=int(fault))


@pytest.mark.area("mining: GH-Archive events")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=15, long_examples=150)
@given(lines=st.lists(event_line(), min_size=1, max_size=6), cut=st.integers(min_value=0, max_value=9999))
def test_event_files_account_for_every_line(lines, cut):
    blob = gzip.compress(b"".join(raw + b"\n" for raw, _ in lines), mtime=0)
    truncated = cut < 2000  # a fifth of the files are cut short
    if truncated:
        blob = blob[: cut * len(blob) // 2000]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "2018-01-26-9.json.gz"
        path.write_bytes(blob)
        records = list(read_events(str(path), "events:x", CFG))
    for rid, result in records:
        check_result(result, rid)
    expected = sum(1 for raw, _ in lines if raw.strip())
    reasons = [r.reason for _, r in records if isinstance(r, Bad)]
    ok = len(records) == expected if not truncated else len(records) == expected or "truncated_gzip" in reasons
    LEDGER.add("mining: GH-Archive events", tried=len(lines), faults=sum(f for _, f in lines) + truncated,
               lost=0 if ok else max(0, expected - len(records)))
    assert ok, (expected, len(records), reasons)


@pytest.mark.area("mining: API JSON")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=60)
@given(obj=mutated(OBJECTS) | st.tuples(JSON, st.just(1)),
       uri=st.sampled_from([None, "", "https://api.github.com/repos/o/r/issues/3/events",
                            "https://api.github.com/repos/o/r/pulls/7/files", "https://api.github.com/repos/o/r/pulls/7"]))
def test_api_objects_parse_or_reject(obj, uri):
    value, faults = obj
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps([value]))
        records = list(read_api_dump(str(path), "api:x", CFG))
    for rid, result in records:
        check_result(result, rid)
    LEDGER.add("mining: API JSON", tried=1, faults=faults, lost=0 if len(records) == 1 else 1)
    assert len(records) == 1
    # the same object with a request URL, as cassettes give them
    check_result(_guard(object_observations, value, uri or "", ""), "api:x#0")


@pytest.mark.area("mining: API JSON")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=25, long_examples=200)
@given(cassette=mutated(CASSETTES, max_mutations=4), gz=st.booleans())
def test_cassettes_parse_or_reject(cassette, gz):
    value, faults = cassette
    blob = json.dumps(value).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("c.json.gz" if gz else "c.json")
        path.write_bytes(gzip.compress(blob) if gz else blob)
        records = list(read_api_dump(str(path), "api:c", CFG))
    for rid, result in records:
        check_result(result, rid)
    LEDGER.add("mining: API JSON", tried=1, faults=faults, lost=0 if records else 1)
    assert records
