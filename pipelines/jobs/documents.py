"""The basic document job: read -> HTML extraction -> length bounds -> Gopher repetition.

This is the composition the demo runs and ``python -m pipelines documents`` exposes for any
input. Quality rules live in ``filters/`` (and datatrove); this module only picks and orders
them, and runs the result on the engine the user chose.
"""

from __future__ import annotations

from pathlib import Path

from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters import GopherRepetitionFilter
from pydantic import Field

from core.config import StrictModel
from core.spark import SparkConfig
from filters.extract import HtmlToText
from filters.length import LengthConfig, TextLength
from pipelines.engine import make_engine
from pipelines.inputs import InputSpec, ReadLimits
from pipelines.job import DocJob, JobResult, Layout
from pipelines.local import LocalEngineConfig


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


def run_documents(
    name: str,
    inputs: list[InputSpec],
    out_dir: str | Path,
    cfg: DocumentsJobConfig,
    master: str | None,
    overwrite: bool,
    config_record: dict | None = None,
) -> JobResult:
    """Run on datatrove locally (``master`` None) or on Spark at ``master``."""
    job = DocJob(
        name,
        inputs,
        build_document_steps(cfg.steps),
        cfg.read,
        config=config_record if config_record is not None else cfg.model_dump(),
    )
    return make_engine(master, cfg.local, cfg.spark).run(job, Layout.single(out_dir), overwrite=overwrite)
