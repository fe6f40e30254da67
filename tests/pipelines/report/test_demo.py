"""The demo report's web section: every corpus pass of the web job's job.json, skipped ones with
their reason. (The whole page is built from a real run in tests/pipelines/test_cli.py.)"""

import json

from pipelines.report.demo import _web

COUNTS = {"edu_score": {"docs_in": 9, "kept": 9, "rejected": 0, "reasons": {}},
          "edu_threshold": {"docs_in": 9, "kept": 7, "rejected": 2, "reasons": {"edu_below_threshold": 2}}}
CONFIG = {"dclm": {"keep_top_fraction": 0.25},
          "edu": {"serve_local_model": True, "score": {"llm": {"model": "smollm2"}, "aggregation": "mean",
                                                        "threshold": 1.9}}}


def write(tmp_path, corpus: dict) -> str:
    job = {"engine": "spark", "kept": 7, "counts": COUNTS, "config": CONFIG, "corpus": corpus}
    (tmp_path / "job.json").write_text(json.dumps(job))
    return _web(tmp_path)


def test_every_corpus_pass_is_reported(tmp_path):
    page = write(tmp_path, {
        "template_lines": 3,
        "minhash": {"clusters": 2, "duplicates": 5, "lsh": "14 bands x 8 rows"},
        "dclm_training": {"positives": 360, "negatives": 120, "precision": 0.875, "recall": 0.5},
        "dclm_threshold": 0.61234, "dclm_threshold_method": "approxQuantile",
        "llm_sample_docs": 6, "llm_unscored_docs": 1,
        "edu_distillation": {"n_train": 5, "decision_agreement": 0.8},
    })
    for text in ("2 clusters, 5 duplicates", "3 template lines", "precision 0.875", "recall 0.5",
                 "0.25 of the corpus: score ≥ 0.6123 (approxQuantile)", "6 documents scored by smollm2",
                 "1 failed", "aggregation mean", "decision_agreement 0.8", "1.9: kept 7 of 9", "engine spark"):
        assert text in page, text


def test_skipped_passes_show_the_jobs_reason(tmp_path):
    page = write(tmp_path, {"llm_sample_docs": 0, "llm_unscored_docs": 0,
                            "edu_distillation": "skipped: no document was scored by the LLM"})
    assert "skipped: no document was scored by the LLM" in page and "0 documents scored" in page
    assert "MinHash" not in page  # minhash: null in the config: no pass, no row
