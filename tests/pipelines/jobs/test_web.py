"""The web job end to end, on both engines, over real documentation pages and the real
SmolLM2 endpoint: same kept documents, same rejects, same corpus-pass results."""

import json
from pathlib import Path

import duckdb
import pytest

from core.config import validate_config
from core.errors import ConfigError, UserError
from core.local_engine import LocalEngine, LocalEngineConfig
from core.spark import SparkConfig
from core.spark_engine import SparkEngine
from pipelines.inputs import InputSpec
from pipelines.jobs import web
from pipelines.jobs.web import WebConfig, quality_steps

ROOT = Path(__file__).resolve().parents[3]


def web_cfg(sample_corpus, llm_url, cache_dir, **over):
    data = {
        "extract_timeout_s": 600,  # generous: a timeout under load would differ between runs
        # long pages cost the CPU-bound LLM many chunks: keep the test's pages short
        "length": {"min_chars": 200, "max_chars": 15000},
        "heuristics": {"gopher_quality": {"max_non_alpha_words_ratio": 0.5}, "fineweb": {"line_punct_thr": 0.05}},
        "dclm": {"keep_top_fraction": 0.6, "spark_relative_error": 0.0},
        "dclm_data": {"positives": [str(sample_corpus.books_jsonl)], "max_per_class": 400},
        "templates": {"min_docs": 3},
        "edu": {"llm_sample_docs": 4, "serve_local_model": False, "score": {
            "threshold": 1.9, "max_chunk_tokens": 512, "batch_docs": 4,
            "llm": {"base_url": llm_url, "model": "smollm2", "cache_dir": str(cache_dir), "timeout_s": 300}}},
        "local": {"tasks": 3, "workers": 2},
    }
    for k, v in over.items():
        data[k] = v
    return validate_config(WebConfig, data)


def inputs(sample_corpus):
    # the tutorial and the HOWTOs: ~40 real pages of explanatory prose with code
    return [InputSpec(path=str(sample_corpus.html_dir), source="python-docs", glob="[th][uo]*/*.html")]


def rows(path, cols):
    q = f"SELECT {cols} FROM read_parquet('{path}', union_by_name=true) ORDER BY id"
    return duckdb.connect().execute(q).fetchall()


@pytest.mark.spark
def test_web_job_on_both_engines(sample_corpus, llm_server, spark, tmp_path):
    cfg = web_cfg(sample_corpus, llm_server, tmp_path / "llm_cache")
    local = web.run(cfg, inputs(sample_corpus), tmp_path / "local", LocalEngine(cfg.local), log=lambda m: None)
    sp = web.run(cfg, inputs(sample_corpus), tmp_path / "spark", SparkEngine(spark, SparkConfig(input_partitions=3)),
                 log=lambda m: None)

    # every stage of the recipe ran and accounted for every document
    stages = local["stages"]
    for s in ("html_to_text", "langid", "gopher_quality_filter", "assistant_phrases", "templated", "dclm_score",
              "dclm_keep_top", "edu_score", "edu_distilled_score", "edu_threshold"):
        assert s in stages
    c = local["counts"]
    assert all(v["docs_in"] == v["kept"] + v["rejected"] for v in c.values())
    assert c["dclm_keep_top"]["kept"] > 0 and c["dclm_keep_top"]["rejected"] > 0
    assert local["corpus"]["llm_sample_docs"] == 4 and local["corpus"]["llm_unscored_docs"] == 0
    assert c["edu_distilled_score"]["docs_in"] > 4  # some documents got a distilled score
    assert local["corpus"]["dclm_training"]["precision"] > 0.8
    assert isinstance(local["corpus"]["edu_distillation"], dict)

    # both engines: identical outputs and corpus results
    assert sp["counts"] == c and sp["corpus"]["dclm_threshold"] == local["corpus"]["dclm_threshold"]
    assert sp["corpus"]["template_lines"] == local["corpus"]["template_lines"]
    kept = "id, text, metadata"
    assert rows(tmp_path / "local/documents/*.parquet", kept) == rows(tmp_path / "spark/documents/*.parquet", kept)
    rej = "id, stage, reason, metadata"
    assert rows(tmp_path / "local/rejects/**/*.parquet", rej) == rows(tmp_path / "spark/rejects/**/*.parquet", rej)

    docs = rows(tmp_path / "local/documents/*.parquet", "id, metadata, edu_score, dclm_score")
    for _, meta, edu, dclm in docs:
        m = json.loads(meta)
        assert edu >= 1.9 and m["edu_source"] in ("llm", "distilled") and dclm > local["corpus"]["dclm_threshold"]
        if m["edu_source"] == "llm":
            assert len(m["edu_chunk_scores"]) == len(m["edu_chunk_tokens"]) >= 1
    saved = json.loads((tmp_path / "local" / "job.json").read_text())
    assert saved["counts"] == c


def test_unreachable_endpoint_is_a_clear_error_before_any_work(sample_corpus, tmp_path):
    dead = "http://127.0.0.1:9/v1"
    cfg = web_cfg(sample_corpus, dead, tmp_path / "c")
    with pytest.raises(UserError, match=r"edu.score.llm.base_url: no OpenAI-compatible endpoint answers at "
                                        r"http://127.0.0.1:9/v1"):
        web.run(cfg, inputs(sample_corpus), tmp_path / "out", LocalEngine(LocalEngineConfig(tasks=2, workers=2)),
                log=lambda m: None)
    assert not (tmp_path / "out").exists()  # the endpoint is checked before the first document is read


def test_nothing_sent_to_the_llm_skips_distillation_with_a_reason(sample_corpus, tmp_path):
    """llm_sample_docs: 0 (or no document above the DCLM threshold) left no edu_score column to
    distil from: the job crashed in DuckDB ("edu_score not found"); now it finishes and says why."""
    cfg = web_cfg(sample_corpus, "http://127.0.0.1:9/v1", tmp_path / "c",
                  edu={"llm_sample_docs": 0, "serve_local_model": False})
    spec = InputSpec(path=str(sample_corpus.html_dir), source="python-docs", glob="tutorial/*.html", max_files=12)
    summary = web.run(cfg, [spec], tmp_path / "out", LocalEngine(LocalEngineConfig(tasks=2, workers=2)),
                      log=lambda m: None)
    assert summary["corpus"]["llm_sample_docs"] == 0
    assert summary["corpus"]["edu_distillation"] == "skipped: no document was scored by the LLM"
    counts = summary["counts"]["edu_threshold"]
    assert counts["kept"] == 0 and counts["reasons"] == {"edu_unscored": counts["docs_in"]}


def test_the_extract_backend_is_validated_and_reaches_the_extraction_step():
    from filters.extract import HtmlToText
    from filters.langid import obtain_lid_model

    lid = str(obtain_lid_model(ROOT / "data"))

    def extractor(**over):
        cfg = validate_config(WebConfig, {"langid": {"model_path": lid}, **over})
        (step,) = [s for s in quality_steps(cfg) if isinstance(s, HtmlToText)]
        return step.backend

    assert extractor() == "resiliparse"  # the crawl default (docs/web.md says why)
    assert extractor(extract_backend="trafilatura") == "trafilatura"
    with pytest.raises(ConfigError, match="extract_backend"):
        validate_config(WebConfig, {"extract_backend": "readability"})
