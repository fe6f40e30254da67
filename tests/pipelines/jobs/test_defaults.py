"""Every job works with its built-in defaults, which are its configs/<job>.yaml, and reports a
configuration problem as one line naming the key before it reads a single document."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.cache import ENV, cache_dir
from core.cached_samples import sample_corpus as sample_corpus_of
from core.config import load_config, validate_config
from core.errors import ConfigError
from core.local_engine import LocalEngine, LocalEngineConfig
from pipelines.inputs import InputSpec
from pipelines.jobs import web
from pipelines.jobs.dedup import DedupJobConfig
from pipelines.jobs.demo import DemoConfig
from pipelines.jobs.longctx_config import LongCtxConfig
from pipelines.jobs.swe_mine import SweMineConfig
from pipelines.jobs.web import WebConfig

ROOT = Path(__file__).resolve().parents[3]
# short real pages: the one the LLM scores takes a few chunks, not dozens
SHORT_PAGES = ["tutorial/interpreter.html", "tutorial/appetite.html", "tutorial/interactive.html",
               "tutorial/whatnow.html", "tutorial/appendix.html", "howto/cporting.html", "library/pwd.html",
               "using/mac.html", "using/editors.html", "library/copy.html", "library/keyword.html",
               "library/mailcap.html"]


@pytest.mark.parametrize("model, name", [(WebConfig, "web"), (DemoConfig, "demo"), (SweMineConfig, "swe_mine"),
                                         (LongCtxConfig, "longctx"), (DedupJobConfig, "dedup")])
def test_builtin_defaults_equal_the_shipped_config(model, name):
    assert model().model_dump() == load_config(model, ROOT / "configs" / f"{name}.yaml").model_dump()


def test_a_partial_section_keeps_the_jobs_defaults_for_the_rest():
    cfg = validate_config(WebConfig, {"edu": {"score": {"mode": "text", "llm": {"cache_dir": None}}},
                                      "dclm": {"keep_top_fraction": 0.5}})
    assert cfg.edu.score.llm.base_url == "http://127.0.0.1:8008/v1" and cfg.edu.score.llm.cache_dir is None
    assert cfg.edu.score.threshold == 1.9 and cfg.edu.score.llm is not None and cfg.edu.serve_local_model
    assert cfg.dclm.train.epoch == 25 and cfg.dclm_data.positives == ["{data_dir}/sample/books.jsonl"]
    verify = validate_config(LongCtxConfig, {"entropylong": {"verify": {"candidates": 3}}}).entropylong.verify
    assert verify.candidates == 3 and verify.delta == 0.5 and verify.max_doc_tokens == 96


def test_dclm_positives_follow_data_dir(tmp_path, monkeypatch):
    from pipelines.jobs.web import resolve_paths

    monkeypatch.chdir(tmp_path)  # relative paths are the driver's: resolved against its cwd
    monkeypatch.setenv(ENV, str(tmp_path / "cache"))  # data_dir's default: the user cache
    assert resolve_paths(WebConfig(data_dir="/srv/cache")).dclm_data.positives == ["/srv/cache/sample/books.jsonl"]
    cfg = resolve_paths(validate_config(WebConfig, {"dclm_data": {"positives": ["mine.jsonl", "{data_dir}/b.jsonl"]}}))
    assert cfg.dclm_data.positives == [str(tmp_path / "mine.jsonl"), str(tmp_path / "cache" / "b.jsonl")]
    assert cfg.edu.score.llm.cache_dir == str(tmp_path / "cache" / "llm_cache")


def test_defaults_started_from_an_empty_directory_find_the_cached_samples(sample_corpus, tmp_path, monkeypatch):
    """No ./data anywhere: every default path of the web, long-context and demo jobs is in the cache."""
    from pipelines.jobs.web import resolve_paths

    monkeypatch.chdir(tmp_path)
    web = resolve_paths(WebConfig())
    assert [Path(p) for p in web.dclm_data.positives] == [sample_corpus.books_jsonl]
    assert Path(web.data_dir) == cache_dir() and Path(web.edu.score.llm.cache_dir).parent == cache_dir()
    assert Path(LongCtxConfig().lm.data_dir) == cache_dir() and Path(DemoConfig().sample.data_dir) == cache_dir()
    assert sample_corpus_of(DemoConfig().sample).html_dir == sample_corpus.html_dir
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def pages(sample_corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("pages")
    for rel in SHORT_PAGES:
        shutil.copy(sample_corpus.html_dir / rel, d / rel.replace("/", "-"))
    return d


@pytest.mark.parametrize("over, message", [
    ({"dclm_data": {"positives": ["/nonexistent/books.jsonl"]}}, "dclm_data.positives[0]: file not found"),
    ({"edu": {"serve_local_model": False, "score": {"llm": None}}}, "edu.score.llm is not set"),
    ({"edu": {"serve_local_model": False, "score": {"llm": {"base_url": "http://127.0.0.1:9/v1"}}}},
     "edu.score.llm.base_url: no OpenAI-compatible endpoint answers at http://127.0.0.1:9/v1"),
    ({"heuristics": {"c4": {"no_such_option": 1}}}, "heuristics.c4:"),
    ({"machine_text": {"model_path": "/nonexistent/detector.bin"}}, "machine_text.model_path: file not found"),
    ({"dclm_data": {"use_html_boilerplate": False}}, "dclm_data.negatives: empty"),
])
def test_config_problems_are_reported_before_any_document_is_read(pages, sample_corpus, tmp_path, over, message):
    data = {"dclm_data": {"positives": [str(sample_corpus.books_jsonl)]}}
    for key, value in over.items():
        data[key] = {**data.get(key, {}), **value}
    cfg = validate_config(WebConfig, data)
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        web.run(cfg, [InputSpec(path=str(pages))], out, LocalEngine(LocalEngineConfig(tasks=1, workers=1)),
                log=lambda m: None)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()  # nothing was read, nothing written


def cli(*args, cwd):
    res = subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


def test_web_dedup_pack_stats_report_run_with_their_defaults(pages, tmp_path):
    """The README's commands with only their required flags (the web job serves SmolLM2 itself),
    started from an empty directory: their defaults find the models and samples in the cache."""
    run = tmp_path / "empty"
    run.mkdir()
    web = tmp_path / "web"
    out = cli("web", "--input", str(pages), "--output", str(web), cwd=run)
    job = json.loads((web / "job.json").read_text())
    assert job["config"]["edu"]["serve_local_model"] and job["corpus"]["llm_sample_docs"] >= 1
    assert job["corpus"]["llm_unscored_docs"] == 0 and "kept" in out
    assert job["counts"]["read"]["docs_in"] == len(SHORT_PAGES)

    dedup = tmp_path / "dedup"
    cli("dedup", "--input", str(web / "phases" / "1-quality" / "documents"), "--output", str(dedup), cwd=run)
    counts = json.loads((dedup / "job.json").read_text())["counts"]
    assert counts["read"]["docs_in"] == job["counts"]["fine_web_quality_filter"]["kept"]

    cli("pack", "--documents", str(web / "phases" / "1-quality" / "documents"), "--output", str(tmp_path / "shards"),
        cwd=run)
    assert json.loads((tmp_path / "shards" / "manifest.json").read_text())["totals"]["sequences"] >= 1
    stats = json.loads(cli("stats", str(web), "--json", cwd=run))
    assert stats  # counts for the job's output
    assert Path(cli("report", str(web), cwd=run).strip()).is_file()
