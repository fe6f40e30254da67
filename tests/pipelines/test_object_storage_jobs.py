"""dedup, pack and swe-mine on ``s3://`` inputs and outputs, against the real S3 server of
``conftest.py`` (moto's, over HTTP): each gives what it gives on the same files from a directory.
dedup streams JSONL and Parquet objects; pack reads a documents prefix through DuckDB (fsspec);
swe-mine streams event files, API dumps and a benchmark, and fetches git repositories (git reads
files by path), an empty repository included: object storage keeps no empty directories."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipelines.test_object_storage import _ok, _one_line_error, _upload, cli


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


def test_pack_reads_a_documents_prefix_and_uploads_its_shards(s3, docs_dir, tmp_path):
    fs, bucket = s3
    docs = tmp_path / "documents"  # a documents dataset as jobs write it: Parquet parts
    docs.mkdir()
    table = pq.read_table(docs_dir / "b.parquet")
    pq.write_table(table.slice(0, 4), docs / "00000.parquet")
    pq.write_table(table.slice(4), docs / "00001.parquet")
    url = _upload(fs, bucket, docs, prefix="run/documents")
    args = ("--seq-len", "64", "--vocab-size", "600")
    _ok(cli("pack", "--documents", str(docs), "--output", str(tmp_path / "local"), *args))
    to_s3 = ("pack", "--documents", url, "--output", f"s3://{bucket}/shards", *args, "--staging", str(tmp_path / "staging"))
    _ok(cli(*to_s3))
    fetched = _fetch(fs, bucket, "shards", tmp_path / "fetched")
    want = json.loads((tmp_path / "local" / "manifest.json").read_text())
    got = json.loads((fetched / "manifest.json").read_text())
    # the same tokenizer and byte-identical shards (documents are packed in id order)
    assert got["shards"] == want["shards"] and got["totals"] == want["totals"] and got["totals"]["docs"] == 9
    assert got["tokenizer"]["id"] == want["tokenizer"]["id"]
    assert sorted(p.name for p in fetched.iterdir()) == ["manifest.json", "shard-00000.arrow", "tokenizer"]
    # a pack output is a job output: packed again in place, not refused as someone else's objects
    _ok(cli(*to_s3))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    from core.cache import cache_dir
    from samples.swe_mine.recordings import obtain_cassettes
    from tests.swe_envs.scenario import build_scenario

    return build_scenario(obtain_cassettes(cache_dir()), tmp_path_factory.mktemp("swe_scenario"))


def test_swe_mine_streams_events_and_api_fetches_repos_and_uploads(s3, scenario, tmp_path):
    fs, bucket = s3
    urls = {k: _upload(fs, bucket, scenario[k], prefix=k) for k in ("events", "api", "repos")}
    fs.put_file(str(scenario["benchmark"]), f"{bucket}/benchmark.jsonl")
    common = ("--set", "pack.seq_len=256", "--set", "tokenizer.vocab_size=1000", "--set", "local.workers=1")

    def mine(out: str, events: str, api: str, repos: str, benchmark: str):
        return _ok(
            cli(
                "swe-mine",
                "--events",
                events,
                "--api",
                api,
                "--repos",
                repos,
                "--benchmark",
                benchmark,
                "--output",
                out,
                "--staging",
                str(tmp_path / "staging"),
                *common,
            )
        )

    mine(str(tmp_path / "local"), *(str(scenario[k]) for k in ("events", "api", "repos", "benchmark")))
    there = mine(
        f"s3://{bucket}/swe", urls["events"], urls["api"], urls["repos"], f"s3://{bucket}/benchmark.jsonl"
    )
    assert f"SWE-bench instances: 2 -> s3://{bucket}/swe/instances.jsonl" in there.stdout
    local, fetched = tmp_path / "local", _fetch(fs, bucket, "swe", tmp_path / "fetched")
    want, got = json.loads((local / "job.json").read_text()), json.loads((fetched / "job.json").read_text())
    assert got["counts"] == want["counts"] and got["outputs"] == want["outputs"]
    # every filter fired on both, the empty repository and the truncated gzip among the parse rejects
    assert {"empty_repository", "truncated_gzip"} <= set(got["counts"]["parse"]["reasons"])
    assert got["counts"]["decontaminate"]["rejected"] == 1
    assert (fetched / "instances.jsonl").read_bytes() == (local / "instances.jsonl").read_bytes()
    cols = "id, text, repo, instance_id"
    assert _rows(fetched / "documents/*.parquet", cols) == _rows(local / "documents/*.parquet", cols)
    assert _rows(fetched / "rejects/*.parquet", "id, stage, reason") == _rows(
        local / "rejects/*.parquet", "id, stage, reason"
    )
    assert (
        json.loads((fetched / "shards/manifest.json").read_text())["shards"]
        == json.loads((local / "shards/manifest.json").read_text())["shards"]
    )
    assert not any((tmp_path / "staging").iterdir())  # the fetched repositories and the staged output: gone


@pytest.mark.spark
def test_swe_mine_on_spark_executors_stream_the_objects(s3, scenario, spark, tmp_path):
    """Spark's Python workers read event files and API dumps from the bucket themselves (with the
    driver's AWS_* settings, which they may have started without) and the fetched repositories."""
    from core.local_engine import LocalEngine
    from core.spark import SparkConfig
    from core.spark_engine import SparkEngine
    from pipelines.jobs.swe_mine import MineInputs, SweMineConfig, run

    fs, bucket = s3
    urls = {k: _upload(fs, bucket, scenario[k], prefix=k) for k in ("events", "api", "repos")}
    cfg = SweMineConfig.model_validate({"pack_shards": False, "local": {"workers": 1}})
    here = run(
        cfg,
        MineInputs(**{k: [str(scenario[k])] for k in urls}),
        tmp_path / "local",
        LocalEngine(cfg.local),
        progress=False,
    )
    there = run(
        cfg,
        MineInputs(**{k: [u] for k, u in urls.items()}),
        tmp_path / "spark",
        SparkEngine(spark, SparkConfig(input_partitions=2)),
        progress=False,
        staging=tmp_path / "staging",
    )
    assert there.engine == "spark" and {s: c.model_dump() for s, c in there.counts.items()} == {
        s: c.model_dump() for s, c in here.counts.items()
    }
    assert (there.out_dir / "instances.jsonl").read_bytes() == (here.out_dir / "instances.jsonl").read_bytes()
    assert there.instances == 3  # no benchmark here: the leaked github3.py pair stays


def test_bad_urls_of_dedup_pack_and_swe_mine_are_one_line_before_work(s3, docs_dir, tmp_path):
    import os

    fs, bucket = s3
    url = _upload(fs, bucket, docs_dir, prefix="docs")
    out = str(tmp_path / "out")

    err = _one_line_error(cli("dedup", "--input", "s3://no-such-bucket-here/x/", "--output", out))
    assert "s3://no-such-bucket-here/x/" in err and "does not exist" in err

    err = _one_line_error(cli("pack", "--documents", f"s3://{bucket}/nothing-here/", "--output", out))
    assert f"s3://{bucket}/nothing-here/" in err and "does not exist" in err
    fs.pipe(f"{bucket}/notes/readme.md", b"not data")
    err = _one_line_error(cli("pack", "--documents", f"s3://{bucket}/notes/", "--output", out))
    assert "no Parquet documents to pack" in err
    err = _one_line_error(cli("swe-mine", "--events", f"s3://{bucket}/notes/", "--output", out))
    assert "no .json[.gz] / .jsonl[.gz] files found" in err
    bare = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    bare |= {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    err = _one_line_error(
        cli(
            "swe-mine",
            "--repos",
            f"s3://{bucket}/docs/",
            "--output",
            out,
            "--staging",
            str(tmp_path / "staging"),
            env=bare,
        )
    )
    assert f"s3://{bucket}/docs/" in err and "no credentials" in err

    fs.pipe(f"{bucket}/theirs/data.csv", b"a,b\n")
    err = _one_line_error(
        cli(
            "dedup",
            "--input",
            url,
            "--output",
            f"s3://{bucket}/theirs/",
            "--staging",
            str(tmp_path / "staging"),
        )
    )
    assert "is not a job output" in err and fs.cat(f"{bucket}/theirs/data.csv") == b"a,b\n"
    assert not Path(out).exists() and not (tmp_path / "staging").exists()


def test_upload_puts_shards_first_and_each_completion_marker_after_what_it_covers(s3, tmp_path):
    from core.errors import UserError
    from core.storage import staged_output, upload_tree

    fs, bucket = s3
    local = tmp_path / "tree"
    for rel in (
        "shards/manifest.json",
        "shards/shard-00000.arrow",
        "shards/tokenizer/tokenizer.json",
        "documents/00000.parquet",
        "fingerprint.json",
        "job.json",
    ):
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_text(rel)
    keys = [k.split("/", 2)[2] for k in upload_tree(local, f"s3://{bucket}/out")]
    assert keys == [
        "fingerprint.json",
        "shards/shard-00000.arrow",
        "documents/00000.parquet",
        "shards/tokenizer/tokenizer.json",
        "shards/manifest.json",
        "job.json",
    ]
    # pack's output has no fingerprint: a cut-short upload of it, its first shard, is still known as ours
    fs.rm(f"{bucket}/out", recursive=True)
    fs.pipe(f"{bucket}/out/shard-00000.arrow", b"cut short")
    with pytest.raises(UserError, match="pass --overwrite"):
        with staged_output(f"s3://{bucket}/out", tmp_path / "staging", replace=False):
            pass
