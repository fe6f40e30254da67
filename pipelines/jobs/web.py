"""The web quality job (GLM-5: GLM-4.5 pipeline + DCLM classifier + LLM edu scoring with
chunk-and-aggregate + strict exclusion of AI-generated/templated text), in four phases:

1. quality   extract → length → language → Gopher repetition/quality, C4, FineWeb →
             assistant phrases → (machine-text detector)
   corpus:   MinHash clusters and template lines (local/Spark implementations that agree);
             the DCLM model, trained here when none is given
2. score     minhash_dedup → templated → dclm_score
   corpus:   DCLM keep threshold (exact locally, approxQuantile on Spark); the LLM sample
3. select    dclm_keep_top → edu_score (the LLM scores the sample, every chunk)
   corpus:   distil the LLM's scores into fastText
4. edu       edu_distilled_score (the rest) → edu_threshold

``OUT/documents`` holds the kept documents, ``OUT/rejects/phase=*/`` every rejected one with
``stage`` and ``reason``, ``OUT/job.json`` per-stage counts and every corpus-pass result.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from datatrove.utils.text import TERMINAL_PUNCTUATION
from pydantic import Field

from core.cache import cache_field
from core.config import StrictModel
from core.engine import Engine
from core.errors import ConfigError, UserError
from core.io import atomic_write_text
from core.llm import LLMConfig
from core.local_engine import LocalEngineConfig
from core.spark import SparkConfig
from filters.assistant_phrases import AssistantPhrases, AssistantPhrasesConfig
from filters.dclm import DclmConfig, DclmKeepTop, DclmScore, DclmThreshold, FastTextArgs, train_classifier
from filters.edu import EduConfig, EduScore, EduThreshold, LlmSample
from filters.edu_distill import EduDistilledScore, LlmScoredRows, train_distilled
from filters.extract import ExtractBackend, HtmlToText
from filters.langid import LangId, LangIdConfig, obtain_lid_model
from filters.length import LengthConfig, TextLength
from filters.machine_text_classifier import MachineText, MachineTextConfig
from filters.minhash import MinhashConfig
from filters.minhash_clusters import MinhashDuplicates
from filters.templates import TemplateConfig, Templated, TemplateLines
from filters.word_tokenizer import SharedSpacyTokenizer
from pipelines.chain import StageCounts
from pipelines.corpus import MinhashClusters, cluster_summary
from pipelines.inputs import InputSpec, ReadLimits, list_input_files
from pipelines.job import DocJob, JobResult, Layout
from pipelines.jobs.quality_data import (
    MIN_CLASS_EXAMPLES,
    DclmTrainData,
    boilerplate_negatives,
    build_dclm_examples,
)
from pipelines.phase import DocPhase
from pipelines.preflight import absolute, probe_endpoint, require_file
from pipelines.report.stats import stage_table


class HeuristicsConfig(StrictModel):
    # keyword arguments of datatrove's own filters; null disables a filter. The defaults are
    # configs/web.yaml's (a documentation-heavy corpus): code tokens and braces are normal there
    gopher_repetition: dict[str, Any] | None = {}
    gopher_quality: dict[str, Any] | None = {"max_non_alpha_words_ratio": 0.5, "min_stop_words": 2}
    c4: dict[str, Any] | None = {"filter_no_terminal_punct": False, "filter_curly_bracket": False}
    fineweb: dict[str, Any] | None = {"line_punct_thr": 0.05, "char_duplicates_ratio": 0.2}


# The web job's defaults are configs/web.yaml's. They live on subclasses, not on field
# defaults, so that a YAML giving part of a section keeps the job's defaults for the rest.
class WebLLMConfig(LLMConfig):
    # replaced by the local server's address when edu.serve_local_model
    base_url: str = "http://127.0.0.1:8008/v1"
    model: str = "smollm2"
    timeout_s: float = Field(default=300.0, gt=0)
    concurrency: int = Field(default=4, gt=0)


class WebEduConfig(EduConfig):
    # factories, here and on every section holding one: its cache_dir is the cache when the config is built
    llm: WebLLMConfig | None = Field(default_factory=WebLLMConfig)
    # SmolLM2's expected scores sit in 1.5-2.1; a large annotator would use FineWeb-Edu's 3
    threshold: float = Field(default=1.9, ge=0, le=5)


class WebDclmConfig(DclmConfig):
    # DCLM's lr 0.1 x 5 epochs suits millions of documents, not a few hundred
    train: FastTextArgs = FastTextArgs(epoch=25, lr=0.5)


DATA_DIR = "{data_dir}"  # in a dclm_data path: the job's data_dir, so one key moves the whole cache


class WebDclmData(DclmTrainData):
    # explanatory long-form prose (written by `python -m samples corpus`)
    positives: list[str] = [DATA_DIR + "/sample/books.jsonl"]


class EduJobConfig(StrictModel):
    score: WebEduConfig = Field(default_factory=WebEduConfig)
    # start our own server over SmolLM2 for the job (instead of score.llm.base_url)
    serve_local_model: bool = True
    # the address the local server binds and advertises; None: 127.0.0.1 for local runs, the
    # driver's address (spark.driver.host) on a Spark cluster, where executors call it
    serve_host: str | None = None
    llm_sample_docs: int = Field(default=16, ge=0)  # documents the LLM scores (all their chunks)
    distill: bool = True


class WebConfig(StrictModel):
    data_dir: str = cache_field()  # models and samples (default: the user cache, core.cache)
    read: ReadLimits = ReadLimits()
    extract_timeout_s: float = Field(default=60.0, gt=0)
    # HTML -> text: Resiliparse, an order of magnitude faster than trafilatura and less precise; at
    # crawl scale extraction is most of the per-page CPU (docs/web.md: the measurements, and when
    # trafilatura is worth its cost)
    extract_backend: ExtractBackend = "resiliparse"
    length: LengthConfig = LengthConfig()
    langid: LangIdConfig = LangIdConfig()
    heuristics: HeuristicsConfig = HeuristicsConfig()
    assistant_phrases: AssistantPhrasesConfig = AssistantPhrasesConfig()
    machine_text: MachineTextConfig = MachineTextConfig()
    templates: TemplateConfig = TemplateConfig()
    minhash: MinhashConfig | None = MinhashConfig()  # null disables near-duplicate removal
    dclm: WebDclmConfig = WebDclmConfig()
    dclm_data: WebDclmData = WebDclmData()
    edu: EduJobConfig = Field(default_factory=EduJobConfig)
    local: LocalEngineConfig = LocalEngineConfig(tasks=8)
    spark: SparkConfig = SparkConfig(input_partitions=8)


def _datatrove_filter(cls, kwargs: dict[str, Any], key: str):
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ConfigError(f"heuristics.{key}: {err}") from None


def resolve_paths(cfg: WebConfig) -> WebConfig:
    """``cfg`` with every file and directory it names made absolute (on the driver)."""
    data = cfg.model_dump()
    data["data_dir"] = absolute(cfg.data_dir)
    for section, key in (("langid", "model_path"), ("machine_text", "model_path"), ("dclm", "model_path")):
        data[section][key] = absolute(data[section][key])
    for key in ("positives", "negatives"):
        data["dclm_data"][key] = [absolute(p.replace(DATA_DIR, cfg.data_dir)) for p in getattr(cfg.dclm_data, key)]
    score = data["edu"]["score"]
    score["tokenizer_path"] = absolute(score["tokenizer_path"])
    if score["llm"] is not None:
        score["llm"]["cache_dir"] = absolute(score["llm"]["cache_dir"])
    return WebConfig.model_validate(data)


def quality_steps(cfg: WebConfig) -> list:
    h = cfg.heuristics
    steps = [HtmlToText(timeout=cfg.extract_timeout_s, backend=cfg.extract_backend), TextLength(cfg.length)]
    steps.append(LangId(cfg.langid, cfg.langid.model_path or obtain_lid_model(cfg.data_dir)))
    # datatrove's own filters, all given one warm spaCy tokenizer (same tokens, ~2x faster)
    shared = SharedSpacyTokenizer("en")
    for key, cls in (("gopher_repetition", GopherRepetitionFilter), ("gopher_quality", GopherQualityFilter),
                     ("c4", C4QualityFilter), ("fineweb", FineWebQualityFilter)):
        kwargs = getattr(h, key)
        if kwargs is not None:
            if cls is FineWebQualityFilter:  # its default is a set's order, which differs per process and
                kwargs = {"stop_chars": tuple(sorted(TERMINAL_PUNCTUATION)), **kwargs}  # made --resume refuse
            steps.append(_datatrove_filter(cls, {"language": shared, **kwargs}, key))
    steps.append(AssistantPhrases(cfg.assistant_phrases))
    if cfg.machine_text.model_path:
        steps.append(MachineText(cfg.machine_text.model_path, cfg.machine_text.threshold))
    return steps


def run(cfg: WebConfig, inputs: list[InputSpec], out: str | Path, engine: Engine, resume: bool = False,
        log=print) -> dict[str, Any]:
    return WebJob(cfg, inputs, out, engine, resume=resume, log=log).run()


class WebJob:
    def __init__(self, cfg: WebConfig, inputs: list[InputSpec], out: str | Path, engine: Engine,
                 resume: bool = False, log=print):
        # every path is resolved here, on the driver: no step may resolve one in a worker
        self.inputs, self.out, self.cfg, self.engine = inputs, Path(out).absolute(), resolve_paths(cfg), engine
        self.resume, self.log = resume, log
        self._lm_dir: Path | None = None
        self.results: list[JobResult] = []
        self.corpus: dict[str, Any] = {}
        self.promote: dict[str, str] = {}

    def _phase(self, index: int, name: str, inputs: list[InputSpec], steps: list, final: bool = False) -> JobResult:
        self.log(f"── phase {index}: {name} ({self.engine.name}) ──")
        job = DocJob(f"web-{name}", inputs, steps, self.cfg.read, config=self.cfg.model_dump(), promote=self.promote)
        # phases start clean unless resuming: a phase's steps embed corpus results (thresholds,
        # template lines, trained models) that a stale earlier output would not match
        res = self.engine.run(DocPhase(job, Layout.phase(self.out, index, name, final), overwrite=not self.resume))
        self.promote = job.chain().promoted
        self.results.append(res)
        return res

    @staticmethod
    def _docs(res: JobResult) -> list[InputSpec]:
        return [InputSpec(path=str(res.documents_dir), format="documents")]

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        cfg = self.cfg
        files, steps1 = self.preflight()
        self.out.mkdir(parents=True, exist_ok=True)
        models = self.out / "models"
        p1 = self._phase(1, "quality", self.inputs, steps1)

        # corpus: template lines over everything that passed the heuristics
        keys = self.engine.compute(TemplateLines(cfg.templates), p1.documents_dir)
        self.corpus["template_lines"] = len(keys)
        steps2 = []
        if cfg.minhash is not None:
            assignments = self.engine.compute(MinhashClusters(cfg.minhash), p1.documents_dir)
            self.corpus["minhash"] = cluster_summary(assignments, cfg.minhash)
            steps2.append(MinhashDuplicates(assignments))
        dclm_path = cfg.dclm.model_path
        if dclm_path is None:
            pos, neg = build_dclm_examples(cfg.dclm_data, p1.documents_dir, files, cfg.read)
            dclm_path = str(models / "dclm.bin")
            report = train_classifier(pos, neg, dclm_path, cfg.dclm.train, cfg.dclm.valid_fraction)
            self.corpus["dclm_training"] = {"positives": len(pos), "negatives": len(neg),
                                            "precision": report.precision, "recall": report.recall,
                                            "f1": report.f1, "held_out": report.n_valid}
            self.log(f"   DCLM classifier: {report}")
        steps2 += [Templated(keys, cfg.templates), DclmScore(dclm_path, cfg.dclm.positive_label)]
        p2 = self._phase(2, "score", self._docs(p1), steps2)

        # corpus: the keep-top threshold, and which of the survivors the LLM will score
        thr, method = self.engine.compute(
            DclmThreshold(cfg.dclm.keep_top_fraction, cfg.dclm.spark_relative_error), p2.documents_dir)
        n_sample = cfg.edu.llm_sample_docs
        sample = self.engine.compute(LlmSample(n_sample, "dclm_score", thr), p2.documents_dir) if n_sample else []
        self.corpus["dclm_threshold"] = thr
        self.corpus["dclm_threshold_method"] = method
        self.corpus["llm_sample_docs"] = len(sample)
        self.log(f"   DCLM keep threshold {thr:.6f} (top {cfg.dclm.keep_top_fraction:.0%}); "
                 f"LLM scores {len(sample)} documents")

        with ExitStack() as stack:
            edu_cfg = self._edu_config(stack)
            selected = frozenset(sample)
            steps3 = [DclmKeepTop(thr)]
            if sample:
                steps3.append(EduScore(edu_cfg, select=_InSet(selected)))
            p3 = self._phase(3, "select", self._docs(p2), steps3)
            failures = p3.counts.get("edu_score", StageCounts()).reasons.get("edu_unscored", 0)
            self.corpus["llm_unscored_docs"] = failures
            if sample and failures == len(sample):
                url = edu_cfg.llm.base_url if edu_cfg.llm else "?"
                raise UserError(f"the LLM endpoint {url} failed for every sampled document; "
                                f"see OUT/rejects (reason edu_unscored) for the errors")

        steps4 = []
        if cfg.edu.distill:
            distilled = self._distil(p3, models / "edu_distilled.bin")
            if distilled:
                steps4.append(EduDistilledScore(distilled))
        steps4.append(EduThreshold(cfg.edu.score.threshold))
        self._phase(4, "edu", self._docs(p3), steps4, final=True)
        summary = self.summary(time.monotonic() - started)
        atomic_write_text(self.out / "job.json", json.dumps(summary, indent=2, default=str))
        return summary

    def preflight(self) -> tuple[list, list]:
        """Every configuration problem, as one line naming its key, before the first document
        is read: inputs, model files, training data, the LLM endpoint (or the local model)."""
        cfg = self.cfg
        files = list_input_files(self.inputs)
        require_file("machine_text.model_path", cfg.machine_text.model_path)
        require_file("langid.model_path", cfg.langid.model_path)
        steps1 = quality_steps(cfg)  # builds datatrove's filters: a bad keyword fails here
        if cfg.dclm.model_path is not None:
            require_file("dclm.model_path", cfg.dclm.model_path)
        else:
            hint = ("run `python -m samples corpus` to put the sample corpus in the cache, set data_dir to a "
                    "directory that holds it, or list your own files")
            for i, path in enumerate(cfg.dclm_data.positives):
                require_file(f"dclm_data.positives[{i}]", path, hint)
            for i, path in enumerate(cfg.dclm_data.negatives):
                require_file(f"dclm_data.negatives[{i}]", path)
            # without negative files, each HTML page's chrome (HTML files and WARC/ARC records
            # alike) is one negative: too few would only be found after the first phase, so
            # they are counted here, reading only until there are enough
            pages = 0
            if cfg.dclm_data.use_html_boilerplate and not cfg.dclm_data.negatives:
                pages = sum(1 for _ in boilerplate_negatives(files, cfg.read, MIN_CLASS_EXAMPLES))
            if not cfg.dclm_data.negatives and pages < MIN_CLASS_EXAMPLES:
                raise ConfigError(
                    f"dclm_data.negatives: empty, and the input has {pages} HTML pages to take boilerplate "
                    f"negatives from (HTML files and WARC/ARC records with >= 10 words of navigation/chrome; "
                    f"DCLM training needs >= {MIN_CLASS_EXAMPLES}): the corpus is too small to train the "
                    "classifier here; list negative files in dclm_data.negatives or set dclm.model_path")
        if cfg.edu.llm_sample_docs:
            require_file("edu.score.tokenizer_path", cfg.edu.score.tokenizer_path)
            if cfg.edu.serve_local_model:
                from core.local_lm import obtain_smollm2

                self._lm_dir = obtain_smollm2(cfg.data_dir, log=self.log)
            elif cfg.edu.score.llm is None:
                raise ConfigError("edu.score.llm is not set: give an endpoint or set edu.serve_local_model: true")
            else:
                probe_endpoint("edu.score.llm.base_url", cfg.edu.score.llm.base_url)
        return files, steps1

    def _edu_config(self, stack: ExitStack) -> EduConfig:
        edu = self.cfg.edu.score
        if self.cfg.edu.serve_local_model and self.cfg.edu.llm_sample_docs:
            from core.llm_server import serve

            model_dir = self._lm_dir
            host = self.cfg.edu.serve_host or self.engine.service_host()
            # one torch thread: the job's worker processes use the other cores, and a busy
            # CPU makes multi-threaded inference several times slower, not faster
            server = serve(model_dir, host, 0, name="smollm2", threads=1)
            stack.callback(server.shutdown)
            url = f"http://{host}:{server.server_address[1]}/v1"
            base = edu.llm or LLMConfig(base_url=url, model="smollm2")
            edu = edu.model_copy(update={
                # the local server answers one request at a time: more in flight only queue
                # up and time out
                "llm": base.model_copy(update={"base_url": url, "model": "smollm2", "concurrency": 1}),
                "tokenizer_path": edu.tokenizer_path or str(model_dir / "tokenizer.json")})
            self.log(f"   serving {model_dir.name} on {url}")
        return edu

    def _distil(self, p3: JobResult, path: Path) -> str | None:
        if not self.corpus.get("llm_sample_docs"):
            # nothing went to the LLM (no document above the DCLM threshold, or llm_sample_docs: 0),
            # so no step promoted edu_score: there is nothing to distil from, and nothing to query
            self.corpus["edu_distillation"] = "skipped: no document was scored by the LLM"
            return None
        rows = self.engine.compute(LlmScoredRows(), p3.documents_dir)
        if len(rows) < 4:
            self.corpus["edu_distillation"] = f"skipped: only {len(rows)} LLM-scored documents"
            return None
        agreement = train_distilled([r[0] for r in rows], [r[1] for r in rows], path, self.cfg.edu.score.threshold)
        self.corpus["edu_distillation"] = agreement.to_dict()
        self.log(f"   {agreement}")
        return str(path)

    def summary(self, seconds: float) -> dict[str, Any]:
        stages: dict[str, dict] = {}
        timings: dict[str, dict] = {}
        for i, res in enumerate(self.results):
            for s in res.stages:
                if s == "read" and i > 0:
                    continue  # re-reading the previous phase's output is not a stage
                stages[s] = res.counts[s].model_dump()
                if s in res.timings:
                    timings[s] = res.timings[s].model_dump()
        return {"name": "web", "engine": self.engine.name, "stages": list(stages), "counts": stages,
                "corpus": self.corpus, "kept": self.results[-1].kept, "seconds": round(seconds, 1),
                "timings": timings, "phase_seconds": {r.name: round(r.seconds, 1) for r in self.results},
                "config": self.cfg.model_dump()}


class _InSet:
    """Picklable "is this document in the LLM sample" predicate."""

    def __init__(self, ids: frozenset[str]):
        self.ids = ids

    def __call__(self, doc) -> bool:
        return doc.id in self.ids


def print_web_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console

    Console().print(stage_table(f"web job ({summary['engine']}): documents per stage", summary["counts"], top=3))
    for key, value in summary["corpus"].items():
        print(f"{key}: {value}")
    print(f"kept {summary['kept']} documents in {summary['seconds']}s")
