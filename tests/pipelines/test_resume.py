"""A job that crashes in the middle and is re-run gives exactly the outputs of a run that never
crashed: nothing lost, nothing duplicated (datatrove completion markers locally; idempotent
overwrites on Spark)."""

from pathlib import Path

import duckdb
import pytest
from datatrove.pipeline.base import PipelineStep

from core.errors import UserError
from core.local_engine import LocalEngineConfig
from core.spark import SparkConfig
from filters.length import LengthConfig, TextLength
from pipelines.job import DocJob
from pipelines.local import run_local
from pipelines.spark import run_spark


class CrashOnce(PipelineStep):
    """Raises on the n-th document of the task with rank ``rank`` — once: the marker file
    records that the crash happened, so the re-run goes through (a worker dying mid-task)."""

    def __init__(self, n: int, rank: int, marker: str):
        super().__init__()
        self.n, self.crash_rank, self.marker = n, rank, marker

    def run(self, data, rank=0, world_size=1):
        for i, doc in enumerate(data):
            if rank == self.crash_rank and i == self.n and not Path(self.marker).exists():
                Path(self.marker).touch()
                raise RuntimeError("injected crash")
            yield doc


def job(small_inputs, marker):
    # raw HTML (no extraction step) is long; the bound makes some rejects
    steps = [TextLength(LengthConfig(min_chars=500, max_chars=30_000)), CrashOnce(2, 1, str(marker))]
    return DocJob("resume", small_inputs, steps)


def files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*.parquet"))}


def test_local_crash_then_resume_is_byte_identical(small_inputs, tmp_path):
    cfg = LocalEngineConfig(tasks=3, workers=2)
    marker = tmp_path / "crashed"
    with pytest.raises(UserError, match="injected crash"):
        run_local(job(small_inputs, marker), tmp_path / "crashy", cfg)
    assert marker.exists()
    completions = tmp_path / "crashy" / "logs" / "completions"
    assert not (completions / "00001").exists()  # the crashed task is not marked done: it will be redone
    resumed = run_local(job(small_inputs, marker), tmp_path / "crashy", cfg)
    clean = run_local(job(small_inputs, marker), tmp_path / "clean", cfg)  # marker exists: no crash
    assert files(tmp_path / "crashy") == files(tmp_path / "clean")
    assert resumed.counts == clean.counts
    assert resumed.counts["read"].docs_in == 43


@pytest.mark.spark
def test_spark_crash_then_rerun_gives_the_same_rows(small_inputs, spark, tmp_path):
    cfg = SparkConfig(input_partitions=3)
    marker = tmp_path / "crashed"
    with pytest.raises(UserError, match="Spark job 'resume' failed: .*injected crash"):
        run_spark(job(small_inputs, marker), tmp_path / "crashy", spark, cfg)
    rerun = run_spark(job(small_inputs, marker), tmp_path / "crashy", spark, cfg)
    clean = run_spark(job(small_inputs, marker), tmp_path / "clean", spark, cfg)
    q = "SELECT id, text, metadata FROM read_parquet('{}/{}/*.parquet', union_by_name=true) ORDER BY id"
    for kind in ("documents", "rejects"):
        a = duckdb.connect().execute(q.format(tmp_path / "crashy", kind)).fetchall()
        b = duckdb.connect().execute(q.format(tmp_path / "clean", kind)).fetchall()
        assert a == b and len(a) > 0
    assert rerun.counts == clean.counts
