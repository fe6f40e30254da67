"""Kill-and-resume for the web quality job (``python -m pipelines web ... --resume``): its whole
process group — datatrove workers, the fastText trainer child and the SmolLM2 server it serves
for edu scoring — is SIGKILLed at a seeded point, the same command runs again, and documents,
rejects (every column) and per-stage counts must equal an uninterrupted run's. The LLM cache
is shared by the runs, so a cache entry torn by the kill must not be read back as an answer.

Long run only (``make chaos``): one web run scores documents with a CPU LLM and trains two
fastText models, minutes on shared cores; CI kills the documents job (same engine, same steps'
resume markers) instead."""

from __future__ import annotations

import json

import pytest

from core.cache import cache_dir
from core.cached_samples import CORPUS_HTML
from tests.reliability.kill import (
    after_first,
    files_left,
    job_counts,
    kill_points,
    parquet_rows,
    run_job,
    work_window,
)
from tests.reliability.ledger import LEDGER, LONG

FIRST_OUTPUT = "**/logs/logs/task_*"  # datatrove opens a task's log when the task starts


@pytest.mark.area("kill-and-resume: web")
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not LONG, reason="part of the long chaos run (make chaos): LLM scoring on CPU takes minutes")
def test_web_job_sigkilled_then_resumed_equals_clean(sample_corpus, tmp_path):
    # the tutorial and the HOWTOs: ~40 real pages (fewer leave DCLM's top 10% too small to distil edu scores)
    args = ["-m", "pipelines", "web", "--config", "configs/web.yaml", "--input", str(sample_corpus.html_dir),
            "--glob", "[th][uo]*/*.html", "--source", "python-docs", "--resume",
            "--set", "edu.llm_sample_docs=4", "--set", "templates.min_docs=3", "--set", "local.tasks=3",
            "--set", f"edu.score.llm.cache_dir={tmp_path / 'llm_cache'}", "--output"]
    work_s = work_window(tmp_path / "clean", FIRST_OUTPUT, [*args, str(tmp_path / "clean")])
    clean = {k: parquet_rows(tmp_path / "clean", k) for k in ("documents", "rejects")}
    assert clean["documents"] and clean["rejects"]
    for i, at in enumerate(kill_points(work_s, seed=26, n=3)):
        out = tmp_path / f"killed-{i}"
        rc, was_killed, _ = run_job([*args, str(out)], kill_when=after_first(out, FIRST_OUTPUT, at))
        state = files_left(out)
        run_job([*args, str(out)])  # the same command again
        got = {k: parquet_rows(out, k) for k in ("documents", "rejects")}
        LEDGER.add("kill-and-resume: web", tried=sum(map(len, clean.values())), faults=int(was_killed),
                   lost=sum(abs(len(clean[k]) - len(got[k])) for k in clean))
        assert got == clean, f"killed {at:.2f}s into the work (rc {rc}); left behind: {state[:40]}"
        assert job_counts(out) == job_counts(tmp_path / "clean")


@pytest.mark.area("kill-and-resume: web")
@pytest.mark.timeout(600)
def test_web_resume_fingerprint_is_the_same_in_every_process(tmp_path):
    """Regression: a phase's fingerprint listed FineWebQualityFilter's stop characters in a set's
    order, which differs per process (string hashing), so every ``--resume`` after a kill was
    refused as "the output of a different job or config". Two runs killed once phase 1 has written
    its fingerprint, under different hash seeds, must agree."""
    tutorial = cache_dir() / CORPUS_HTML / "tutorial"
    if not tutorial.is_dir():
        pytest.skip("the sample corpus is not in the cache (python -m samples corpus)")
    digests = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed-{seed}"
        args = ["-m", "pipelines", "web", "--config", "configs/web.yaml", "--input", str(tutorial),
                "--glob", "*.html", "--resume", "--output", str(out)]
        _, killed, _ = run_job(args, kill_when=after_first(out, "phases/1-*/fingerprint.json", 0.0),
                               env={"PYTHONHASHSEED": seed})
        assert killed
        digests.append(json.loads(next(out.glob("phases/1-*/fingerprint.json")).read_text())["digest"])
    LEDGER.add("kill-and-resume: web", tried=2, faults=2)
    assert digests[0] == digests[1]


@pytest.mark.area("kill-and-resume: web")
def test_edu_score_fingerprint_names_the_model_not_the_endpoint_address():
    """Regression: phase 3's fingerprint held the locally served model's URL, a new port each run,
    so ``--resume`` after a kill in or past that phase was refused (found by the long test above)."""
    from core.llm import LLMConfig
    from filters.edu import EduConfig, EduScore
    from pipelines.chain import describe_step

    def described(port: int, model: str) -> dict:
        return describe_step(EduScore(EduConfig(llm=LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model=model))))
    assert described(40001, "smollm2") == described(40002, "smollm2")
    assert described(40001, "smollm2") != described(40001, "another-model")
