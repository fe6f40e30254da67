"""A per-document phase: the same step objects on datatrove's local executor and on Spark give the
same outputs, whichever engine runs the ``DocPhase``."""

import json

import duckdb
import pytest

from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig
from core.spark_engine import SparkEngine
from filters.length import LengthConfig
from pipelines.inputs import InputSpec, ReadLimits
from pipelines.job import DocJob, Layout
from pipelines.jobs.documents import DocumentStepsConfig, build_document_steps
from pipelines.phase import DocPhase


def rows(out, kind, cols):
    q = f"SELECT {cols} FROM read_parquet('{out}/{kind}/*.parquet') ORDER BY id"
    return duckdb.connect().execute(q).fetchall()


@pytest.mark.spark
def test_local_and_spark_agree(small_inputs, spark, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"id": "ok1", "text": "' + b"fine words here " * 30 + b'"}\n{broken\n{"id": "e", "text": ""}\n'
    )
    inputs = [*small_inputs, InputSpec(path=str(bad), source="bad")]
    # a generous extraction timeout: a timeout under machine load would differ between runs
    steps = build_document_steps(DocumentStepsConfig(length=LengthConfig(min_chars=300), extract_timeout_s=600))
    job = DocJob("agree", inputs, steps, ReadLimits(reject_text_chars=500))

    local = LocalEngine(LocalEngineConfig(tasks=3, workers=2)).run(DocPhase(job, Layout.single(tmp_path / "local")))
    sp = SparkEngine(spark, SparkConfig(input_partitions=3)).run(DocPhase(job, Layout.single(tmp_path / "spark")))
    assert (local.engine, sp.engine) == ("local", "spark")

    kept_local = rows(tmp_path / "local", "documents", "id, text, metadata, n_chars")
    kept_spark = rows(tmp_path / "spark", "documents", "id, text, metadata, n_chars")
    assert kept_local == kept_spark
    rej_local = rows(tmp_path / "local", "rejects", "id, text, metadata, stage, reason")
    rej_spark = rows(tmp_path / "spark", "rejects", "id, text, metadata, stage, reason")
    assert rej_local == rej_spark

    # the job did real work: documents kept and rejected at several stages, bad lines counted
    assert len(kept_local) > 10
    stages = {r[3] for r in rej_local}
    assert {"read", "text_length", "gopher_repetition_filter"} <= stages
    assert ("bad/bad.jsonl#L2", "malformed_json") in {(r[0], r[4]) for r in rej_local}
    meta = json.loads(kept_local[0][2])
    assert meta["source"] in {"python-docs", "books"} and "n_chars" in meta

    for result in (local, sp):
        assert result.stages == ["read", "html_to_text", "text_length", "gopher_repetition_filter"]
        for s in result.stages:
            c = result.counts[s]
            assert c.docs_in == c.kept + c.rejected
    assert {s: c.model_dump() for s, c in local.counts.items()} == {
        s: c.model_dump() for s, c in sp.counts.items()
    }
    # stage times and input bytes reach job.json on both engines (Spark: through an accumulator)
    for result in (local, sp):
        assert list(result.timings) == result.stages and result.timings["html_to_text"].seconds > 0
    assert local.timings["read"].bytes_in == sp.timings["read"].bytes_in > 0
    total_in = local.counts["read"].docs_in
    assert total_in == len(kept_local) + len(rej_local) == 40 + 3 + 3
