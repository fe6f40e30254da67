"""Fixtures of the benchmark tests."""

from __future__ import annotations

import pytest

from benchmarks import _report
from core.cache import cache_dir
from core.cached_samples import CORPUS_HTML
from samples.corpus import fetch_package
from tests.training.conftest import make_tiny_hf


@pytest.fixture
def tiny_smollm2(tmp_path, monkeypatch):
    """A tiny random Llama with SmolLM2's real tokenizer standing in for SmolLM2 (``hf: smollm2``), the
    post-training data built into a cache of its own and the benchmark JSONs written under tmp_path."""
    from transformers import AutoTokenizer

    from core.local_lm import obtain_smollm2

    tok = AutoTokenizer.from_pretrained(str(obtain_smollm2(log=lambda _m: None)))
    fetch_package("python3.11-doc", cache_dir(), log=lambda m: None)
    cache = tmp_path / "cache"
    (cache / CORPUS_HTML).parent.mkdir(parents=True)
    (cache / CORPUS_HTML).symlink_to(cache_dir() / CORPUS_HTML)
    tiny = make_tiny_hf(tmp_path / "tiny", tok)
    monkeypatch.setenv("GLM5_RECIPE_CACHE", str(cache))
    monkeypatch.setattr("samples.post_train.fetch_package", lambda *a, **k: None)
    monkeypatch.setattr("core.local_lm.obtain_smollm2", lambda *a, **k: tiny)
    monkeypatch.setattr(_report, "OUT_DIR", tmp_path / "bench")
    return tiny
