"""The basic document job: read -> HTML extraction -> length bounds -> Gopher repetition.

This is the composition the demo runs and ``python -m pipelines documents`` exposes for any
input. Quality rules live in ``filters/`` (and datatrove); this module only picks and orders
them, and runs the result on the engine it is given.
"""

from __future__ import annotations

from pathlib import Path

from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters import GopherRepetitionFilter
from pydantic import Field

from core.config import StrictModel
from core.engine import Engine
from core.local_engine import LocalEngineConfig
from core.spark import SparkConfig
from filters.extract import HtmlToText
from filters.length import LengthConfig, TextLength
from pipelines.inputs import InputSpec, ReadLimits
from pipelines.job import DocJob, JobResult, Layout
from pipelines.phase import DocPhase


class DocumentStepsConfig(StrictModel):
    # a guard against pathological pages, not a budget: too low turns machine load into rejects
    extract_timeout_s: float = Field(default=60.0, gt=0)
    length: LengthConfig = LengthConfig()
    # datatrove's Gopher repetition filter (MassiveText thresholds)
    gopher_repetition: bool = True


class DocumentsJobConfig(StrictModel):
    read: ReadLimits = ReadLimits()
    steps: DocumentStepsConfig = DocumentStepsConfig()
    local: LocalEngineConfig = LocalEngineConfig()
    spark: SparkConfig = SparkConfig()


def build_document_steps(cfg: DocumentStepsConfig) -> list[PipelineStep]:
    steps: list[PipelineStep] = [HtmlToText(timeout=cfg.extract_timeout_s), TextLength(cfg.length)]
    if cfg.gopher_repetition:
        steps.append(GopherRepetitionFilter())
    return steps


def run(cfg: DocumentsJobConfig, inputs: list[InputSpec], out: str | Path, engine: Engine,
        overwrite: bool = False) -> JobResult:
    job = DocJob("documents", inputs, build_document_steps(cfg.steps), cfg.read, config=cfg.model_dump())
    return engine.run(DocPhase(job, Layout.single(out), overwrite))
