"""Inputs and outputs in object storage, against a real S3 server: moto's, serving HTTP from a
thread of this process (s3fs talks to it over the network as to any S3 endpoint; nothing is
mocked on the client side). The documents job on ``s3://`` inputs counts exactly what it counts
on the same files read from a directory, locally and on Spark; an ``s3://`` output holds
``documents/`` and ``job.json``; a missing bucket, missing credentials and an empty prefix are
one line each, before any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from core.cache import cache_dir
from core.errors import UserError
from pipelines.inputs import InputSpec, list_input_files
from samples.web_archives import obtain_web_archives

ROOT = Path(__file__).resolve().parents[2]
# real archives no one here wrote, with their damage: a truncated one, a whole-file gzip, an ARC
WARCS = ("pywb-iana.warc.gz", "warcio-example.warc.gz", "warcio-example-trunc.warc",
         "warcio-example-bad-non-chunked.warc.gz", "warcio-example.arc.gz", "pywb-example.warc")


@pytest.fixture(scope="module")
def input_dir(sample_corpus, tmp_path_factory):
    """``in/pages/*.html`` (12 real documentation pages) and ``in/crawl/*`` (real web archives)."""
    d = tmp_path_factory.mktemp("objects") / "in"
    (d / "pages").mkdir(parents=True)
    for p in sorted(sample_corpus.html_dir.glob("*.html"))[:12]:
        shutil.copy(p, d / "pages" / p.name)
    (d / "crawl").mkdir()
    archives = {p.name: p for p in obtain_web_archives(cache_dir(), log=lambda m: None)}
    for name in WARCS:
        shutil.copy(archives[name], d / "crawl" / name)
    return d


def _upload(fs, bucket: str, local: Path, prefix: str = "in") -> str:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), f"{bucket}/{prefix}/{p.relative_to(local).as_posix()}")
    return f"s3://{bucket}/{prefix}/"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env if env is not None else dict(os.environ), timeout=900)


def _ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), res.stderr[-2000:]
    return lines[-1]


def _ids(path: str) -> list[str]:
    return sorted(r[0] for r in duckdb.sql(f"SELECT id FROM read_parquet('{path}/*.parquet')").fetchall())


@pytest.fixture(scope="module")
def local_run(input_dir, tmp_path_factory):
    """The documents job on the directory: the reference every object-storage run must equal."""
    out = tmp_path_factory.mktemp("local") / "out"
    _ok(cli("documents", "--input", str(input_dir), "--output", str(out), "--set", "local.tasks=2"))
    return out


def test_urls_list_as_their_directory_does(s3, input_dir):
    fs, bucket = s3
    url = _upload(fs, bucket, input_dir)

    def listing(path: str, **kw):
        return [(f.relpath, f.format, f.source) for f in list_input_files([InputSpec(path=path, **kw)])]

    assert listing(url) == sorted(listing(str(input_dir)))  # S3 lists keys in byte order
    assert len(listing(url)) == 12 + len(WARCS)
    assert listing(f"s3://{bucket}/in/crawl/*.warc.gz") == listing(str(input_dir / "crawl" / "*.warc.gz"))
    one = f"s3://{bucket}/in/crawl/pywb-iana.warc.gz"
    assert listing(one) == [("pywb-iana.warc.gz", "warc", "pywb-iana")] == listing(
        str(input_dir / "crawl" / "pywb-iana.warc.gz"))
    assert listing(url, glob="*.html") == sorted(listing(str(input_dir), glob="*.html"))


def test_documents_job_reads_and_writes_s3_with_the_counts_of_a_directory(s3, input_dir, local_run, tmp_path):
    fs, bucket = s3
    url = _upload(fs, bucket, input_dir)
    out = f"s3://{bucket}/runs/docs"
    _ok(cli("documents", "--input", url, "--output", out, "--set", "local.tasks=2", "--staging", str(tmp_path)))

    want = json.loads((local_run / "job.json").read_text())
    got = json.loads(fs.cat(f"{bucket}/runs/docs/job.json"))
    assert got["counts"] == want["counts"]
    read = got["counts"]["read"]
    assert read["docs_in"] == read["kept"] + read["rejected"] and read["kept"] >= 12 and read["rejected"] > 0
    assert fs.glob(f"{bucket}/runs/docs/documents/*.parquet") and fs.glob(f"{bucket}/runs/docs/rejects/*.parquet")
    # the same documents, by id, as from the directory (ids are source/relative path)
    fetched = tmp_path / "fetched"
    fs.get(f"{bucket}/runs/docs/", str(fetched), recursive=True)
    assert _ids(str(fetched / "documents")) == _ids(str(local_run / "documents"))
    assert [p.name for p in tmp_path.iterdir()] == ["fetched"]  # the staging directory is gone once uploaded

    # the output is now a job output: replaced only when asked
    again = cli("documents", "--input", url, "--output", out, "--staging", str(tmp_path))
    assert "pass --overwrite" in _one_line_error(again)


def _spark_documents(spark, inputs: str, out: str) -> None:
    from core.spark import SparkConfig
    from core.spark_engine import SparkEngine
    from pipelines.jobs import documents

    documents.run(documents.DocumentsJobConfig(), [InputSpec(path=inputs)], out,
                  SparkEngine(spark, SparkConfig(input_partitions=2)))


@pytest.mark.spark
def test_documents_job_on_spark_reads_s3_and_uploads_its_output(s3, input_dir, spark, tmp_path):
    from core.storage import staged_output

    fs, bucket = s3
    url = _upload(fs, bucket, input_dir)
    # the reference is Spark's own run on the directory: trafilatura drops text it has seen more
    # than twice in its process, so how files are spread over tasks decides whether the third and
    # fourth example.com captures extract to nothing (they do on Spark's contiguous slices here, not
    # with datatrove's round-robin ranks)
    _spark_documents(spark, str(input_dir), str(tmp_path / "from-dir"))
    out = f"s3://{bucket}/runs/spark"
    with staged_output(out, tmp_path / "staging", replace=False) as staged:
        _spark_documents(spark, url, staged)  # executors stream the objects themselves
    got = json.loads(fs.cat(f"{bucket}/runs/spark/job.json"))
    assert got["engine"] == "spark"
    assert got["counts"] == json.loads((tmp_path / "from-dir" / "job.json").read_text())["counts"]
    assert got["counts"]["read"]["docs_in"] > got["counts"]["read"]["kept"] >= 12
    fs.get(f"{bucket}/runs/spark/", str(tmp_path / "fetched"), recursive=True)
    assert _ids(str(tmp_path / "fetched" / "documents")) == _ids(str(tmp_path / "from-dir" / "documents"))
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").iterdir())


def test_missing_bucket_empty_prefix_and_no_credentials_are_one_line(s3, input_dir, tmp_path):
    fs, bucket = s3
    url = _upload(fs, bucket, input_dir / "pages")
    out = str(tmp_path / "out")

    err = _one_line_error(cli("documents", "--input", "s3://no-such-bucket-here/x/", "--output", out))
    assert "s3://no-such-bucket-here/x/" in err and "does not exist" in err

    err = _one_line_error(cli("documents", "--input", f"s3://{bucket}/nothing-here/", "--output", out))
    assert f"s3://{bucket}/nothing-here/" in err and "does not exist" in err

    fs.pipe(f"{bucket}/notes/readme.md", b"not a document")
    err = _one_line_error(cli("documents", "--input", f"s3://{bucket}/notes/", "--output", out))
    assert "no document files found" in err

    bare = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    bare |= {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    err = _one_line_error(cli("documents", "--input", url, "--output", out, env=bare))
    assert url in err and "no credentials" in err

    err = _one_line_error(cli("documents", "--input", url, "--output", "s3://no-such-bucket-here/out/",
                              "--staging", str(tmp_path / "staging")))
    assert "no-such-bucket-here" in err and "does not exist" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "staging").exists()


def test_an_output_url_holding_other_objects_is_refused(s3, input_dir, tmp_path):
    fs, bucket = s3
    url = _upload(fs, bucket, input_dir / "pages")
    fs.pipe(f"{bucket}/theirs/data.csv", b"a,b\n")
    err = _one_line_error(cli("documents", "--input", url, "--output", f"s3://{bucket}/theirs/",
                              "--staging", str(tmp_path), "--overwrite"))
    assert "is not a job output" in err
    assert fs.cat(f"{bucket}/theirs/data.csv") == b"a,b\n"


def test_web_job_reads_s3_archives_before_work(s3, input_dir, tmp_path):
    """`python -m pipelines web --input s3://…`: the web job's preflight reads the archives' HTML
    records from the bucket (DCLM negatives are counted before any work); the two captures of
    example.com have too little navigation, which it says in one line, and nothing is written."""
    fs, bucket = s3
    _upload(fs, bucket, input_dir)
    res = cli("web", "--input", f"s3://{bucket}/in/crawl/pywb-example*.warc", "--output", f"s3://{bucket}/web/",
              "--staging", str(tmp_path / "staging"))
    err = _one_line_error(res)
    assert "dclm_data.negatives: empty, and the input has 0 HTML pages" in err
    assert not fs.exists(f"{bucket}/web")


def test_web_job_with_its_defaults_reads_and_writes_s3(s3, input_dir, tmp_path):
    """The acceptance command, `web --input s3://BUCKET/PREFIX/ --output s3://…`, on the real archives:
    the same counts as the job on the same files from a directory (up to the LLM's own stages)."""
    fs, bucket = s3
    url = _upload(fs, bucket, input_dir / "crawl", prefix="crawl")
    _ok(cli("web", "--input", str(input_dir / "crawl"), "--output", str(tmp_path / "local")))
    _ok(cli("web", "--input", url, "--output", f"s3://{bucket}/web", "--staging", str(tmp_path / "staging")))

    want = json.loads((tmp_path / "local" / "job.json").read_text())
    got = json.loads(fs.cat(f"{bucket}/web/job.json"))
    assert got["stages"] == want["stages"]
    deterministic = got["stages"][: got["stages"].index("edu_score")]  # edu: an LLM's scores of a sample
    assert {s: got["counts"][s] for s in deterministic} == {s: want["counts"][s] for s in deterministic}
    read = got["counts"]["read"]
    assert read["docs_in"] == read["kept"] + read["rejected"] and read["reasons"]["request_record"] > 100
    assert fs.glob(f"{bucket}/web/documents/*.parquet") and fs.glob(f"{bucket}/web/rejects/**/*.parquet")


def test_an_upload_cut_short_can_be_overwritten_and_job_json_goes_last(s3, tmp_path):
    from core.storage import staged_output, upload_tree

    fs, bucket = s3
    out = f"s3://{bucket}/cut"
    fs.pipe(f"{bucket}/cut/fingerprint.json", b"{}")  # what an upload cut short leaves first
    fs.pipe(f"{bucket}/cut/documents/old.parquet", b"old")
    with pytest.raises(UserError, match="pass --overwrite"):
        with staged_output(out, tmp_path, replace=False):
            pass
    local = tmp_path / "tree"
    for rel in ("documents/00000.parquet", "rejects/00000.parquet", "fingerprint.json", "job.json", "logs/x"):
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_text(rel)
    keys = upload_tree(local, out)
    assert len(keys) == 5 and keys[0].endswith("/fingerprint.json") and keys[-1] == f"{bucket}/cut/job.json"
    assert sorted(fs.find(f"{bucket}/cut")) == sorted(keys)  # the old objects are gone
    assert fs.cat(f"{bucket}/cut/documents/00000.parquet") == b"documents/00000.parquet"


def test_every_reader_gives_the_same_documents_from_an_object(s3, input_dir, tmp_path):
    """JSONL (plain and gzipped), Parquet, a documents dataset, gzipped HTML and web archives: read
    from the bucket, each gives exactly the documents and rejects it gives from the disk."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.records import get_reject
    from pipelines.inputs import ReadLimits
    from pipelines.readers import read_files

    d = tmp_path / "in"
    shutil.copytree(input_dir / "crawl", d / "crawl")
    lines = [json.dumps({"id": f"r{i}", "text": f"record {i} " * 20}) for i in range(5)] + ["{broken", ""]
    (d / "a.jsonl").write_text("\n".join(lines) + "\n")
    (d / "b.jsonl.gz").write_bytes(gzip.compress((d / "a.jsonl").read_bytes()))
    pq.write_table(pa.table({"id": ["p0", "p1"], "text": ["some text " * 30, ""]}), d / "c.parquet")
    pq.write_table(pa.table({"id": ["d0"], "text": ["kept text " * 30], "metadata": ['{"k": 1}']}), d / "e.parquet")
    page = next(iter(sorted((input_dir / "pages").iterdir())))
    (d / "f.html.gz").write_bytes(gzip.compress(page.read_bytes()))
    fs, bucket = s3
    url = _upload(fs, bucket, d)

    def docs(path: str, fmt: str = "auto"):
        specs = [InputSpec(path=path, source="in", format=fmt)]
        return [(x.id, x.text, get_reject(x), x.metadata.get("file"))
                for x in read_files(list_input_files(specs), ReadLimits())]

    here, there = docs(str(d)), docs(url)
    assert len(there) > 300 and sorted(there, key=repr) == sorted(here, key=repr)
    assert {r[3] for r in there} >= {"a.jsonl", "b.jsonl.gz", "c.parquet", "f.html.gz", "crawl/pywb-iana.warc.gz"}
    assert docs(f"s3://{bucket}/in/e.parquet", "documents") == docs(str(d / "e.parquet"), "documents")
