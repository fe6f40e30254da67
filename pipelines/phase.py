"""A per-document phase as an engine runs it: ``engine.run(DocPhase(job, layout))``.

Its two implementations sit side by side: datatrove's executor locally (``pipelines.local``),
``mapInArrow`` on Spark (``pipelines.spark``). Both run the same step objects through the same
``StepChain`` and write the same ``Layout``, which is what makes their outputs identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.local_engine import LocalEngine
from core.spark_engine import SparkEngine
from pipelines.job import DocJob, JobResult, Layout
from pipelines.local import run_local
from pipelines.spark import run_spark


@dataclass(frozen=True)
class DocPhase:
    job: DocJob
    layout: Layout
    # replace a different job's output (and never resume this one's)
    overwrite: bool = False

    def local(self, engine: LocalEngine) -> JobResult:
        return run_local(self.job, self.layout, engine.cfg, overwrite=self.overwrite)

    def spark(self, engine: SparkEngine) -> JobResult:
        return run_spark(self.job, self.layout, engine.session, engine.cfg, overwrite=self.overwrite)
