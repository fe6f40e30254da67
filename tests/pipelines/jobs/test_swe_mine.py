"""swe-mine end to end: real recordings + derived events + real git clones, on DuckDB and Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from core.cache import cache_dir
from core.local_engine import LocalEngine
from core.spark import SparkConfig
from core.spark_engine import SparkEngine
from pipelines.jobs import swe_mine
from pipelines.jobs.swe_mine import MineInputs, SweMineConfig
from swe_envs.mining.stages import STAGES
from tests.swe_envs.scenario import build_scenario

ROOT = Path(__file__).resolve().parents[3]
KEPT = ["pycqa/pyflakes#313:pycqa/pyflakes#290", "requests/toolbelt#200:requests/toolbelt#199"]
EXPECTED_REASONS = {
    "parse": {
        "truncated_gzip",
        "malformed_json",
        "unknown_event_type",
        "missing_field",
        "undecodable",
        "empty_repository",
        "unused_event_type",
        "unsupported_object",
        "http_error",
    },
    "link": {
        "issue_without_linked_pr",
        "pull_without_linked_issue",
        "issue_not_observed",
        "link_target_is_pull",
        "closing_commit_without_pull",
    },
    "repo_filter": {"fork"},
    "issue_filter": {
        "pr_not_merged",
        "several_merged_prs",
        "bot_pr_author",
        "pr_before_issue",
        "template_only",
    },
    "patch_filter": {"commit_missing", "binary_diff", "no_diff", "no_test_change"},
    "dedup": {"duplicate_issue"},
    "decontaminate": {"benchmark_problem_statement"},
}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    from samples.swe_mine.recordings import obtain_cassettes

    return build_scenario(obtain_cassettes(cache_dir()), tmp_path_factory.mktemp("swe_scenario"))


def _cfg(sc) -> SweMineConfig:
    cfg = SweMineConfig.model_validate({"pack": {"seq_len": 256}, "tokenizer": {"vocab_size": 1000}})
    cfg.mining.decontaminate.benchmarks = [str(sc["benchmark"])]
    return cfg


def _inputs(sc) -> MineInputs:
    return MineInputs(events=[str(sc["events"])], api=[str(sc["api"])], repos=[str(sc["repos"])])


@pytest.fixture(scope="module")
def duck(scenario, tmp_path_factory):
    out = tmp_path_factory.mktemp("swe_duckdb")
    cfg = _cfg(scenario)
    with LocalEngine(cfg.local) as engine:
        return swe_mine.run(cfg, _inputs(scenario), out, engine, progress=False)


def _rows(out: Path, kind: str, cols: str):
    return (
        duckdb.connect()
        .execute(f"SELECT {cols} FROM read_parquet('{out}/{kind}/*.parquet') ORDER BY ALL")
        .fetchall()
    )


def test_real_pairs_are_mined_and_every_filter_is_counted(duck):
    out = duck.out_dir
    docs = _rows(out, "documents", "id, text, metadata, instance_id, files_changed, context_tokens")
    assert [d[0] for d in docs] == KEPT
    prev_kept = None
    for stage in STAGES:
        c = duck.counts[stage]
        assert c.docs_in == c.kept + c.rejected and sum(c.reasons.values()) == c.rejected
        if prev_kept is not None and stage != "link":
            assert c.docs_in == prev_kept
        prev_kept = c.kept
        assert EXPECTED_REASONS.get(stage, set()) <= set(c.reasons), (stage, c.reasons)
    assert duck.counts["relevant_files"].kept == duck.documents == duck.instances == 2
    rejects = _rows(out, "rejects", "id, stage, reason, metadata")
    assert len(rejects) == sum(c.rejected for c in duck.counts.values())
    dup = next(r for r in rejects if r[2] == "duplicate_issue")
    assert dup[0] == "requests/toolbelt#211:requests/toolbelt#210" and KEPT[1] in json.loads(dup[3])["detail"]
    leak = next(r for r in rejects if r[1] == "decontaminate")
    assert leak[0] == "sigmavirus24/github3.py#776:sigmavirus24/github3.py#775"
    job = json.loads((out / "job.json").read_text())
    assert job["counts"] == {s: c.model_dump() for s, c in duck.counts.items()} and job["engine"] == "local"
    assert duck.manifest is not None and duck.manifest.totals.docs == 2 and duck.manifest.totals.tokens > 0


def test_documents_and_swe_bench_instances(duck):
    out = duck.out_dir
    text, meta = _rows(out, "documents", "text, metadata")[1]
    meta = json.loads(meta)
    for tag in ("<repository ", "<issue ", "<discussion>", "<relevant_files ", "<pull_request ", "<patch>"):
        assert tag in text
    assert "Multipart decoder is casesensitive" in text  # the real issue title
    assert (
        meta["relevant_files"]["method"].startswith("touched")
        and meta["relevant_files"]["budget_tokens"] == 16000
    )
    assert [f["reason"] for f in meta["relevant_files"]["files"]][:2] == ["touched", "touched"]
    assert meta["patch"]["test_files"] == ["tests/test_multipart_decoder.py"] and meta["link_kinds"] == [
        "pr_body"
    ]
    lines = (out / "instances.jsonl").read_text().splitlines()
    insts = [json.loads(line) for line in lines]
    assert [i["instance_id"] for i in insts] == ["PyCQA__pyflakes-313", "requests__toolbelt-200"]
    tb = insts[1]
    assert tb["repo"] == "requests/toolbelt" and tb["created_at"] == "2017-11-21T00:20:22Z"
    assert tb["problem_statement"].startswith(
        'Multipart decoder is casesensitive in evaluating string "multipart"\n'
    )
    assert tb["patch"].startswith("diff --git a/requests_toolbelt/multipart/decoder.py")
    assert tb["test_patch"].startswith("diff --git a/tests/test_multipart_decoder.py")
    assert "multipart/decoder.py" not in tb["test_patch"]
    # the base commit is the mainline parent of the PR's merge commit in the clone
    clone = _clone(duck, "requests/toolbelt")
    merge = subprocess.run(
        ["git", "-C", str(clone), "log", "--all", "--format=%H", "--grep", "^Merge pull request #200 "],
        capture_output=True,
        text=True,
    ).stdout.split()
    parent = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", f"{merge[0]}^1"], capture_output=True, text=True
    )
    assert len(merge) == 1 and tb["base_commit"] == parent.stdout.strip() == meta["patch"]["base_commit"]


def _clone(duck, name: str) -> Path:
    rows = (
        duckdb.connect()
        .execute(
            f"SELECT payload FROM read_parquet('{duck.out_dir}/work/entities/*.parquet') WHERE kind = 'gitrepo' AND key = '{name}'"
        )
        .fetchall()
    )
    return Path(json.loads(rows[0][0])["path"])


@pytest.mark.spark
def test_spark_gives_identical_outputs(duck, scenario, spark, tmp_path):
    sp = swe_mine.run(_cfg(scenario), _inputs(scenario), tmp_path / "spark", SparkEngine(spark, SparkConfig()),
                      progress=False)
    for kind, cols in (
        ("documents", "id, text, metadata, repo, instance_id, files_changed, context_tokens"),
        ("rejects", "id, text, metadata, stage, reason"),
    ):
        assert _rows(duck.out_dir, kind, cols) == _rows(sp.out_dir, kind, cols), kind
    assert (duck.out_dir / "instances.jsonl").read_bytes() == (sp.out_dir / "instances.jsonl").read_bytes()
    assert {s: c.model_dump() for s, c in duck.counts.items()} == {
        s: c.model_dump() for s, c in sp.counts.items()
    }
    assert {k: v for k, v in duck.stats.items() if k != "timings"} == {
        k: v for k, v in sp.stats.items() if k != "timings"
    }
    assert sp.engine == "spark"


def test_cli_end_to_end_and_user_errors(scenario, tmp_path):
    api = tmp_path / "api"
    api.mkdir()
    (api / "User_events.json").write_bytes((scenario["api"] / "User_events.json").read_bytes())
    cmd = [
        sys.executable,
        "-m",
        "pipelines",
        "swe-mine",
        "--api",
        str(api),
        "--repos",
        str(scenario["repos"] / "requests"),
        "--output",
        str(tmp_path / "out"),
        "--set",
        "pack_shards=false",
        "--set",
        "local.workers=1",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "every filter's effect" in proc.stdout and "SWE-bench instances: 1" in proc.stdout
    for stage in STAGES:
        assert stage in proc.stdout
    inst = [json.loads(line) for line in (tmp_path / "out" / "instances.jsonl").read_text().splitlines()]
    assert [i["instance_id"] for i in inst] == ["requests__toolbelt-200"]
    missing = subprocess.run(
        [*cmd[:4], "--events", str(tmp_path / "nope"), "--output", str(tmp_path / "o2")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        f"error: --events path does not exist: {tmp_path / 'nope'}"
    ]


def test_links_from_git_history_timeline_events_and_pr_bodies(tmp_path):
    """acme/widgets (tests/swe_envs/gitrepos.py) + real issue texts + timeline items."""
    from samples.swe_mine.gitrepo import git
    from samples.swe_mine.recordings import obtain_cassettes, recorded_events
    from tests.swe_envs.gitrepos import project
    from tests.swe_envs.scenario import real_object

    repo = project(tmp_path / "repos" / "widgets")
    events = recorded_events(obtain_cassettes(cache_dir()))
    texts = [
        real_object(events, "IssuesEvent", f"https://github.com/{u}")
        for u in (
            "requests/requests/issues/4389",
            "requests/requests/issues/4407",
            "pypa/twine/issues/268",
            "requests/requests/issues/4419",
        )
    ]

    def issue(n, src, created="2020-01-02T00:00:00Z"):
        return {
            "url": f"https://api.github.com/repos/acme/widgets/issues/{n}",
            "html_url": f"https://github.com/acme/widgets/issues/{n}",
            "number": n,
            "title": src["title"],
            "body": src["body"],
            "user": src["user"],
            "labels": [],
            "state": "closed",
            "created_at": created,
            "updated_at": "2020-02-01T00:00:00Z",
        }

    bors = git(repo, "log", "--format=%H", "--grep", "^Merge #8").strip()
    pull200 = real_object(events, "PullRequestEvent", "https://github.com/requests/toolbelt/pull/200")
    pr5 = json.loads(
        json.dumps(pull200)
        .replace("requests/toolbelt", "acme/widgets")
        .replace("/pull/200", "/pull/5")
        .replace("/pulls/200", "/pulls/5")
    )
    pr5.update(number=5, body="Fixes #4, fixes #14", merge_commit_sha=None, created_at="2020-01-03T00:00:00Z")
    pr5["head"]["sha"] = None
    api = tmp_path / "api"
    api.mkdir()
    dump = [
        issue(4, texts[0]),
        issue(14, texts[1]),
        pr5,
        {
            "event": "closed",
            "commit_id": bors,
            "created_at": "2020-01-06T02:00:00Z",
            "issue": issue(12, texts[2]),
        },
        {
            "event": "closed",
            "commit_id": "a" * 40,
            "created_at": "2020-01-06T02:00:00Z",
            "issue": issue(15, texts[3]),
        },
    ]
    (api / "dump.json").write_text(json.dumps(dump))
    pr7_view = {
        "number": 7,
        "title": "Lower-case tokens",
        "pull_request": {"url": "x"},
        "url": "https://api.github.com/repos/acme/widgets/issues/7",
        "html_url": "https://github.com/acme/widgets/pull/7",
    }
    cassette = {
        "http_interactions": [
            {
                "request": {
                    "uri": "https://api.github.com/repos/acme/widgets/issues/13/timeline",
                    "method": "GET",
                },
                "response": {
                    "status": {"code": 200},
                    "headers": {},
                    "body": {
                        "string": json.dumps(
                            [
                                {
                                    "event": "cross-referenced",
                                    "created_at": "2020-01-05T01:00:00Z",
                                    "source": {"type": "issue", "issue": pr7_view},
                                }
                            ]
                        )
                    },
                },
            }
        ]
    }
    (api / "timeline_cassette.json").write_text(json.dumps(cassette))
    cfg = SweMineConfig.model_validate({"pack_shards": False, "local": {"workers": 1}})
    res = swe_mine.run(cfg, MineInputs(api=[str(api)], repos=[str(tmp_path / "repos")]), tmp_path / "out",
                       LocalEngine(cfg.local), progress=False)
    rejects = {
        r[0]: (r[1], r[2], json.loads(r[3]))
        for r in _rows(res.out_dir, "rejects", "id, stage, reason, metadata")
    }
    docs = {r[0]: json.loads(r[1]) for r in _rows(res.out_dir, "documents", "id, metadata")}
    outcome = {**{k: v[:2] for k, v in rejects.items()}, **{k: ("kept", None) for k in docs}}
    meta = {**{k: v[2] for k, v in rejects.items()}, **docs}
    # timeline: issue #12 closed by the bors merge commit -> PR #8; PR #8 changes no test
    assert outcome["acme/widgets#8:acme/widgets#12"] == ("patch_filter", "no_test_change")
    assert meta["acme/widgets#8:acme/widgets#12"]["link_kinds"] == ["timeline_closed_by_commit"]
    # a cross-reference only mentions: counted, not paired
    assert outcome["acme/widgets#7->acme/widgets#13"] == ("link", "non_closing_reference")
    assert outcome[f"commit:acme/widgets@{'a' * 40}->acme/widgets#15"] == (
        "link",
        "closing_commit_without_pull",
    )
    assert outcome["acme/widgets#5->acme/other#9"] == ("link", "issue_not_observed")  # cross-repo ref, unseen
    # PR #5 closes #4 (git branch commit + API body) and #14 (API body): both kept, flagged
    for n in (4, 14):
        pid = f"acme/widgets#5:acme/widgets#{n}"
        assert outcome[pid] == ("kept", None), (pid, outcome[pid])
        assert (
            meta[pid]["flags"] == ["pr_linked_to_several_issues"]
            and meta[pid]["instance_id"] == f"acme__widgets-5-i{n}"
        )
    assert meta["acme/widgets#5:acme/widgets#4"]["link_kinds"] == ["git_commit_message", "pr_body"]
    assert outcome[
        "commit:acme/widgets@"
        + git(repo, "log", "--format=%H", "--grep", "closes #3").strip()
        + "->acme/widgets#3"
    ] == ("link", "closing_commit_without_pull")
