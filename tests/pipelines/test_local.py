import json

import duckdb
import pytest

from core.errors import InputError, UserError
from core.local_engine import LocalEngineConfig
from filters.length import LengthConfig, TextLength
from pipelines.inputs import InputSpec
from pipelines.job import DocJob, Layout, counts_from_outputs, finish
from pipelines.local import run_local


def write_docs(path, n, short_every=3):
    with open(path, "w") as fh:
        for i in range(n):
            text = "tiny" if i % short_every == 0 else f"document number {i} " * 20
            fh.write(json.dumps({"id": f"d{i:03d}", "text": text}) + "\n")
        fh.write("{oops\n")


def job_for(tmp_path, n=30):
    (tmp_path / "in").mkdir(exist_ok=True)
    write_docs(tmp_path / "in" / "a.jsonl", n)
    write_docs(tmp_path / "in" / "b.jsonl", 5)
    return DocJob(
        "t", [InputSpec(path=str(tmp_path / "in"), source="s")], [TextLength(LengthConfig(min_chars=50))]
    )


def test_outputs_counts_and_job_json(small_job):
    out = small_job.out_dir
    job = json.loads((out / "job.json").read_text())
    assert job["engine"] == "local" and job["stages"] == small_job.stages
    assert job["counts"] == {s: small_job.counts[s].model_dump() for s in small_job.stages}
    # each stage's own time and input bytes, summed over the tasks (what benchmarks read)
    assert list(job["timings"]) == small_job.stages
    assert all(t["seconds"] >= 0 and t["cpu_seconds"] >= 0 for t in job["timings"].values())
    assert job["timings"]["read"]["bytes_in"] > job["timings"]["text_length"]["bytes_in"] > 0
    assert job["timings"]["html_to_text"]["cpu_seconds"] > 0  # the extractor's sandbox process included
    n_docs = (
        duckdb.connect()
        .execute(f"SELECT count(*) FROM read_parquet('{out}/documents/*.parquet')")
        .fetchone()[0]
    )
    n_rej = (
        duckdb.connect()
        .execute(f"SELECT count(*) FROM read_parquet('{out}/rejects/*.parquet')")
        .fetchone()[0]
    )
    assert n_docs == small_job.kept and n_docs + n_rej == small_job.counts["read"].docs_in == 43
    cols = (
        duckdb.connect()
        .execute(f"DESCRIBE SELECT * FROM read_parquet('{out}/documents/*.parquet')")
        .fetchall()
    )
    assert ("n_chars", "BIGINT") in [(c[0], c[1]) for c in cols]  # promoted typed column


def test_rerun_resumes_and_other_job_is_refused(tmp_path):
    job = job_for(tmp_path)
    cfg = LocalEngineConfig(tasks=2, workers=1)
    first = run_local(job, tmp_path / "out", cfg)
    snapshot = {p.name: p.read_bytes() for p in (tmp_path / "out" / "documents").iterdir()}
    again = run_local(job, tmp_path / "out", cfg)  # all tasks completed: nothing re-runs
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / "documents").iterdir()} == snapshot
    assert again.counts == first.counts
    assert first.counts["text_length"].reasons == {"too_short": 12}
    assert first.counts["read"].reasons == {"malformed_json": 2}

    other = DocJob("t", job.inputs, [TextLength(LengthConfig(min_chars=3))])
    with pytest.raises(UserError, match="different job or config.*--overwrite"):
        run_local(other, tmp_path / "out", cfg)
    replaced = run_local(other, tmp_path / "out", cfg, overwrite=True)
    assert replaced.counts["text_length"].rejected == 0


def test_overwrite_never_deletes_a_foreign_directory(tmp_path):
    job = job_for(tmp_path, n=4)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "thesis.tex").write_text("years of work")
    with pytest.raises(UserError, match="not a job output; refusing"):
        run_local(job, tmp_path / "precious", LocalEngineConfig(tasks=1, workers=1), overwrite=True)
    assert (tmp_path / "precious" / "thesis.tex").read_text() == "years of work"


def test_rank_without_documents_leaves_an_empty_dataset_file(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(json.dumps({"id": "x", "text": "short"}) + "\n")
    (tmp_path / "in" / "b.jsonl").write_text(json.dumps({"id": "y", "text": "long enough " * 10}) + "\n")
    job = DocJob("t", [InputSpec(path=str(tmp_path / "in"))], [TextLength(LengthConfig(min_chars=20))])
    res = run_local(job, tmp_path / "out", LocalEngineConfig(tasks=2, workers=1))
    assert sorted(p.name for p in (tmp_path / "out" / "documents").iterdir()) == [
        "00000.parquet",
        "00001.parquet",
    ]
    assert res.kept == 1


def test_lost_documents_are_detected(tmp_path):
    job = job_for(tmp_path, n=10)
    res = run_local(job, tmp_path / "out", LocalEngineConfig(tasks=2, workers=1))
    live = {s: c.model_copy(deep=True) for s, c in res.counts.items()}
    (tmp_path / "out" / "rejects" / "00000.parquet").unlink()  # simulate a lost output file
    layout = Layout.single(tmp_path / "out")
    assert counts_from_outputs(layout, res.stages)["read"].docs_in < live["read"].docs_in
    with pytest.raises(AssertionError, match="lost or duplicated"):
        finish(job, "local", layout, res.stages, live, 0.0)


def test_missing_input_fails_before_any_work(tmp_path):
    job = DocJob("t", [InputSpec(path=str(tmp_path / "missing"))], [TextLength()])
    with pytest.raises(InputError, match="does not exist"):
        run_local(job, tmp_path / "out", LocalEngineConfig())
    assert not (tmp_path / "out").exists()
