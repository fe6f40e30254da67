import json
import subprocess
import sys

import duckdb
import pytest

from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig
from core.spark_engine import SparkEngine
from filters.minhash import MinhashConfig
from pipelines.inputs import InputSpec
from pipelines.jobs import dedup
from pipelines.jobs.dedup import DedupJobConfig
from pipelines.jobs.dedup_eval import evaluate


@pytest.fixture(scope="module")
def dup_input(sample_corpus, tmp_path_factory):
    """JSONL of real passages, with exact and near copies planted and a malformed line."""
    import random

    from filters.minhash import words
    from pipelines.jobs.dedup_eval import plant
    from pipelines.jobs.quality_data import passages

    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    ps = list(passages(books[4:8], 200))[::25][:60]
    rng = random.Random(0)
    vocab = [w for p in ps[40:] for w in words(p)]
    rows = [{"id": f"p{i:03d}", "text": p} for i, p in enumerate(ps[:40])]
    rows.append({"id": "q_copy_of_p003", "text": ps[3]})
    rows.append({"id": "q_near_of_p004", "text": " ".join(plant(words(ps[4]), 0.9, vocab, 5, rng)[0])})
    path = tmp_path_factory.mktemp("dedup") / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def table(path, cols):
    return duckdb.connect().execute(f"SELECT {cols} FROM read_parquet('{path}', union_by_name=true) ORDER BY id").fetchall()


@pytest.mark.spark
def test_dedup_job_on_both_engines(dup_input, spark, tmp_path):
    cfg = DedupJobConfig()
    inputs = [InputSpec(path=str(dup_input), source="books")]
    local = dedup.run(cfg, inputs, tmp_path / "local", LocalEngine(LocalEngineConfig(tasks=2, workers=2)),
                      log=lambda m: None)
    sp = dedup.run(cfg, inputs, tmp_path / "spark", SparkEngine(spark, SparkConfig(input_partitions=2)),
                   log=lambda m: None)
    assert local["counts"] == sp["counts"] and local["corpus"] == sp["corpus"]
    c = local["counts"]
    assert c["read"]["reasons"] == {"malformed_json": 1}
    assert c["minhash_dedup"] == {"docs_in": 42, "kept": 40, "rejected": 2, "reasons": {"near_duplicate": 2}}
    for name in ("local", "spark"):
        assert table(tmp_path / name / "documents/*.parquet", "id, text, metadata") == table(
            tmp_path / "local/documents/*.parquet", "id, text, metadata")
    rejects = table(tmp_path / "local/rejects/**/*.parquet", "id, reason, metadata")
    dups = {r[0]: json.loads(r[2])["duplicate_of"] for r in rejects if r[1] == "near_duplicate"}
    assert dups == {"q_copy_of_p003": "p003", "q_near_of_p004": "p004"}
    kept = {r[0]: json.loads(r[1]) for r in table(tmp_path / "local/documents/*.parquet", "id, metadata")}
    assert kept["p003"]["minhash_cluster_size"] == 2 and kept["p010"]["minhash_cluster_size"] == 1
    assert "minhash_cluster" in kept["p010"]


def test_dedup_cli(dup_input, tmp_path):
    run = subprocess.run([sys.executable, "-m", "pipelines", "dedup", "--input", str(dup_input), "--output",
                          str(tmp_path / "out"), "--set", "local.tasks=1"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "minhash_dedup: in 42, kept 40, rejected 2" in run.stdout
    assert (tmp_path / "out" / "job.json").is_file()


def test_planted_duplicates_recall_and_precision(sample_corpus):
    res = evaluate(sample_corpus.books_jsonl, MinhashConfig(), pairs_per_bin=30, unrelated=150)
    assert res.recall_at_least(0.8) >= 0.95 and res.precision >= 0.99, res.table()
    low = next(f / p for (lo, _), p, f in res.per_bin if lo == 0.5)
    assert low < 0.3  # far below the LSH threshold: mostly not merged
