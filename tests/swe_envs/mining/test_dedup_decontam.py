import json
import random

import pytest

from core.errors import InputError
from filters.minhash import Signer
from filters.minhash_clusters import clusters_verified
from swe_envs.mining.config import DecontamConfig, NearDuplicateConfig
from swe_envs.mining.decontam import BenchmarkIndex
from swe_envs.mining.entities import merge_entity
from swe_envs.mining.stages import duplicate_of
from tests.swe_envs.scenario import real_object

MH = NearDuplicateConfig()


def _duplicates(items: list[tuple[str, str]], cfg: NearDuplicateConfig) -> dict[str, str]:
    """swe-mine's dedup decision over (id, problem statement) rows."""
    signer = Signer(cfg.signatures())
    sigs = [(i, signer.text_signature(t)) for i, t in items]
    return duplicate_of(clusters_verified(sigs, signer, cfg.threshold))


def _texts(events):
    out = {}
    for e in events:
        if e["type"] == "IssuesEvent" and len(e["payload"]["issue"].get("body") or "") > 400:
            i = e["payload"]["issue"]
            out[i["html_url"]] = f"{i['title']}\n{i['body']}"
    return out


def test_near_duplicates_cluster_to_the_smallest_id(events):
    texts = sorted(_texts(events).values())
    assert len(texts) > 20
    base = texts[0]
    items = [(f"id{i:03d}", t) for i, t in enumerate(texts)]
    items += [("id900", base + " Same here on Linux."), ("id901", base), ("id950", "")]
    dup = _duplicates(items, MH)
    assert dup == {"id900": "id000", "id901": "id000"}
    shuffled = items[:]
    random.Random(3).shuffle(shuffled)
    assert _duplicates(shuffled, MH) == dup  # order of arrival does not matter


def test_transitive_clusters_keep_one():
    words = [f"w{i}" for i in range(200)]
    a = " ".join(words)
    b = " ".join(words[10:] + [f"x{i}" for i in range(10)])
    c = " ".join(words[20:] + [f"x{i}" for i in range(20)])
    cfg = NearDuplicateConfig(threshold=0.85)
    dup = _duplicates([("c", c), ("b", b), ("a", a)], cfg)
    assert dup == {"b": "a", "c": "a"}


def test_benchmark_matches_by_id_repo_pr_and_paraphrase(events, tmp_path):
    issue = real_object(events, "IssuesEvent", "https://github.com/sigmavirus24/github3.py/issues/775")
    text = f"{issue['title']}\n{issue['body']}"
    words = text.split()
    bench = tmp_path / "bench.jsonl"
    rows = [
        {"instance_id": "requests__toolbelt-200", "repo": "requests/toolbelt", "problem_statement": "x"},
        {"instance_id": "PyCQA__pyflakes-313", "problem_statement": "y"},
        {
            "instance_id": "a__b-1",
            "repo": "a/b",
            "problem_statement": " ".join(words[:-5] + ["thanks", "a", "lot", "for", "this"]),
        },
    ]
    bench.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    idx = BenchmarkIndex.load([str(bench)], DecontamConfig().minhash)
    assert len(idx) == 3
    assert (
        idx.match("requests__toolbelt-200", "requests/toolbelt", 200, "other")[0] == "benchmark_instance_id"
    )
    assert idx.match("pycqa__pyflakes-313-i290", "pycqa/pyflakes", 313, "other")[0] == "benchmark_repo_pr"
    hit = idx.match("sigmavirus24__github3.py-776", "sigmavirus24/github3.py", 776, text)
    assert hit[0] == "benchmark_problem_statement" and hit[1].startswith("a__b-1")
    other = real_object(events, "IssuesEvent", "https://github.com/requests/toolbelt/issues/199")
    assert (
        idx.match("requests__toolbelt-9", "requests/toolbelt", 9, f"{other['title']}\n{other['body']}")
        is None
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n{oops\n')
    with pytest.raises(InputError, match="bad.jsonl:2"):
        BenchmarkIndex.load([str(bad)], DecontamConfig().minhash)
    with pytest.raises(InputError, match="not found"):
        BenchmarkIndex.load([str(tmp_path / "missing.jsonl")], DecontamConfig().minhash)


def test_entity_merge_is_order_independent_and_keeps_facts():
    obs = [
        {
            "title": "old",
            "body": "b1",
            "created_at": "2020-01-02T00:00:00Z",
            "merged": None,
            "_observed_at": "2020-01-02T00:00:00Z",
            "_source": "events",
        },
        {
            "title": "new",
            "body": "",
            "created_at": "2020-01-01T00:00:00Z",
            "merged": False,
            "_observed_at": "2020-01-05T00:00:00Z",
            "_source": "api",
        },
        {
            "merged": True,
            "merged_at": "2020-01-04T00:00:00Z",
            "git": {"how": "merge"},
            "_observed_at": "2020-01-04T00:00:00Z",
            "_source": "git",
        },
        {"api_files": [{"filename": "a.py"}], "_observed_at": "2020-01-03T00:00:00Z", "_source": "api"},
        {"api_files": [{"filename": "b.py"}], "_observed_at": "2020-01-03T00:00:00Z", "_source": "api"},
    ]
    payloads = [json.dumps(o) for o in obs]
    merged = merge_entity("pull", payloads)
    for seed in range(5):
        random.Random(seed).shuffle(payloads)
        assert merge_entity("pull", payloads) == merged
    assert merged["title"] == "new" and merged["body"] == "b1"  # the newest non-empty value of each field
    assert merged["created_at"] == "2020-01-01T00:00:00Z" and merged["merged"] is True
    assert [f["filename"] for f in merged["api_files"]] == ["a.py", "b.py"]
    assert merged["sources"] == ["api", "events", "git"] and merged["n_observations"] == 5
    closed = merge_entity("pull", [json.dumps({"merged": False, "_observed_at": "x"})])
    assert closed["merged"] is False
