import json
import subprocess
import sys

import pyarrow.parquet as pq

from pipelines.report.stats import collect_stats


def test_job_output_stats_match_the_files(small_job):
    s = collect_stats(small_job.out_dir)
    docs = pq.read_table(small_job.documents_dir).to_pylist()
    rejects = pq.read_table(small_job.out_dir / "rejects").to_pylist()
    assert s["documents"]["documents"] == len(docs) == small_job.kept
    assert s["documents"]["chars"] == sum(len(d["text"]) for d in docs)
    by_source = {}
    for d in docs:
        by_source[json.loads(d["metadata"])["source"]] = (
            by_source.get(json.loads(d["metadata"])["source"], 0) + 1
        )
    assert {k: v["documents"] for k, v in s["documents"]["sources"].items()} == by_source
    flat = {(st, r): n for st, rs in s["rejects"]["rejects_by_stage"].items() for r, n in rs.items()}
    expected = {}
    for r in rejects:
        expected[(r["stage"], r["reason"])] = expected.get((r["stage"], r["reason"]), 0) + 1
    assert flat == expected
    assert s["documents"]["columns"]["n_chars"]["max"] == max(d["n_chars"] for d in docs)
    assert s["job"]["counts"]["read"]["docs_in"] == len(docs) + len(rejects)


def test_shard_stats_match_manifest(small_shards):
    s = collect_stats(small_shards["dir"])["shards"]
    m = small_shards["manifest"]
    assert s["matches_manifest"] and s["tokens"] == m.totals.tokens
    assert {k: v["sequences"] for k, v in s["sources"].items()} == {
        k: c.sequences for k, c in m.counts.items()
    }
    assert abs(sum(s["mixture"].values()) - 1) < 1e-3


def test_stats_cli(small_job, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pipelines", "stats", str(small_job.out_dir), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(run.stdout)
    assert data["documents"]["documents"] == small_job.kept
    run = subprocess.run(
        [sys.executable, "-m", "pipelines", "stats", str(small_job.out_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "documents per stage" in run.stdout and "gopher_repetition_filter" in run.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "pipelines", "stats", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.strip() == f"error: no such path: {tmp_path / 'nope'}"
    assert "Traceback" not in bad.stderr
