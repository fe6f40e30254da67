"""Jobs beyond ``documents`` on ``s3://`` inputs and outputs, against the real S3 server of
``conftest.py`` (moto's, over HTTP): each gives what it gives on the same files from a directory.
dedup streams JSONL and Parquet objects."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipelines.test_object_storage import _ok, _upload, cli


def _rows(path: Path | str, cols: str) -> list[tuple]:
    return duckdb.connect().execute(f"SELECT {cols} FROM read_parquet('{path}') ORDER BY ALL").fetchall()


def _fetch(fs, bucket: str, prefix: str, local: Path) -> Path:
    fs.get(f"{bucket}/{prefix}/", str(local), recursive=True)
    return local


@pytest.fixture(scope="module")
def docs_dir(sample_corpus, tmp_path_factory) -> Path:
    """Real passages as a JSONL file and a Parquet documents file, with an exact and a near copy
    planted across the two and one broken line."""
    from filters.minhash import words
    from pipelines.jobs.dedup_eval import plant
    from pipelines.jobs.quality_data import passages

    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    ps = list(passages(books[4:6], 200))[::25][:30]
    vocab = [w for p in ps[20:] for w in words(p)]
    near = " ".join(plant(words(ps[4]), 0.9, vocab, 5, random.Random(0))[0])
    d = tmp_path_factory.mktemp("dedup_in") / "docs"
    d.mkdir()
    rows = [{"id": f"p{i:03d}", "text": p} for i, p in enumerate(ps[:12])] + [{"id": "q_near", "text": near}]
    (d / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    more = [(f"p{i:03d}", p) for i, p in enumerate(ps[12:20], start=12)] + [("q_copy", ps[3])]
    meta = [json.dumps({"source": "books"})] * len(more)
    pq.write_table(
        pa.table({"id": [r[0] for r in more], "text": [r[1] for r in more], "metadata": meta}),
        d / "b.parquet",
    )
    return d


def test_dedup_reads_and_writes_s3_as_a_directory(s3, docs_dir, tmp_path):
    fs, bucket = s3
    url = _upload(fs, bucket, docs_dir, prefix="docs")
    local = _ok(
        cli("dedup", "--input", str(docs_dir), "--output", str(tmp_path / "local"), "--set", "local.tasks=1")
    )
    there = _ok(
        cli(
            "dedup",
            "--input",
            url,
            "--output",
            f"s3://{bucket}/dedup",
            "--set",
            "local.tasks=1",
            "--staging",
            str(tmp_path / "staging"),
        )
    )
    assert "minhash_dedup: in 22, kept 20, rejected 2" in local.stdout
    assert there.stdout.splitlines()[-2:] == local.stdout.splitlines()[-2:]  # counts and clusters
    want = json.loads((tmp_path / "local" / "job.json").read_text())
    got = json.loads(fs.cat(f"{bucket}/dedup/job.json"))
    assert got["counts"] == want["counts"] and got["corpus"] == want["corpus"]
    assert got["counts"]["read"]["reasons"] == {"malformed_json": 1}
    fetched = _fetch(fs, bucket, "dedup", tmp_path / "fetched")
    for part in ("documents/*.parquet", "rejects/**/*.parquet"):
        assert _rows(fetched / part, "id, text, metadata") == _rows(
            tmp_path / "local" / part, "id, text, metadata"
        )
    assert {
        r[0] for r in _rows(fetched / "rejects/**/*.parquet", "id, reason") if r[1] == "near_duplicate"
    } == {"q_copy", "q_near"}
    assert not any((tmp_path / "staging").iterdir())  # uploaded, then removed
