"""Shared fixtures: the real sample corpus, one Spark session, a small real job + shards.

Everything here is real: the corpus comes from Debian packages (in the user cache, ``core.cache``;
``GLM5_RECIPE_CACHE`` points elsewhere), the
Spark session is local[2], the document job runs on datatrove's local executor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# fixture tasks carry their own verifier tests (tests/test_outputs.py), run inside their containers, not here
collect_ignore_glob = ["swe_envs/terminal/fixtures/*"]


@pytest.fixture(scope="session")
def sample_corpus():
    from samples.corpus import SampleConfig, obtain_sample

    return obtain_sample(SampleConfig(), log=lambda m: None)


@pytest.fixture(scope="session")
def small_inputs(sample_corpus, tmp_path_factory):
    """40 real documentation pages + 3 real novels cut to 60k chars (keeps tests quick)."""
    from pipelines.inputs import InputSpec

    d = tmp_path_factory.mktemp("small_inputs")
    books = [json.loads(line) for line in sample_corpus.books_jsonl.read_text().splitlines()][:3]
    with open(d / "books.jsonl", "w") as fh:
        for b in books:
            fh.write(json.dumps(b | {"text": b["text"][:60_000]}) + "\n")
    return [
        InputSpec(path=str(sample_corpus.html_dir), source="python-docs", glob="*.html", max_files=40),
        InputSpec(path=str(d / "books.jsonl"), source="books"),
    ]


@pytest.fixture(scope="session")
def spark():
    from core.spark import SparkConfig, spark_session

    session = spark_session(SparkConfig(master="local[2]", shuffle_partitions=4))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def small_job(small_inputs, tmp_path_factory):
    """The demo's document steps over the small inputs, on datatrove's local executor."""
    from core.local_engine import LocalEngine
    from pipelines.jobs import documents

    out = tmp_path_factory.mktemp("small_job")
    cfg = documents.DocumentsJobConfig.model_validate({"local": {"tasks": 3, "workers": 2}})
    return documents.run(cfg, small_inputs, out, LocalEngine(cfg.local), overwrite=True)


@pytest.fixture(scope="session")
def small_shards(small_job, tmp_path_factory):
    """Tokenizer trained on the small job's documents, packed into shards (seq_len 128)."""
    from core.tokenizer import TokenizerConfig, load_or_train
    from pipelines.pack import PackConfig, iter_documents, pack_documents

    out = tmp_path_factory.mktemp("small_shards")
    texts = (r[1] for rows in iter_documents(small_job.documents_dir, 64) for r in rows)
    tok, info = load_or_train(TokenizerConfig(vocab_size=2048), texts, out / "tokenizer")
    manifest = pack_documents(
        small_job.documents_dir,
        tok,
        info,
        out / "shards",
        PackConfig(seq_len=128, sequences_per_shard=300),
        progress=False,
    )
    return {"dir": out / "shards", "manifest": manifest, "tokenizer": tok, "info": info}


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct as a transformers directory (downloaded + converted once, in the cache)."""
    from core.local_lm import obtain_smollm2

    return obtain_smollm2(log=lambda m: None)


@pytest.fixture(scope="session")
def llm_server(smollm2_dir):
    """The project's own OpenAI-compatible server over SmolLM2, on a free loopback port."""
    from core.llm_server import serve

    # one thread: tests run datatrove workers and Spark beside it on two cores
    server = serve(smollm2_dir, "127.0.0.1", 0, name="smollm2", threads=1)
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def extraction_eval():
    """trafilatura 1.0.0's labelled test pages (pages folder, labelled pages), fetched once into data/."""
    from samples.extraction_eval import obtain_extraction_eval

    return obtain_extraction_eval(ROOT / "data", log=lambda m: None)


@pytest.fixture
def scripted_server():
    """(the scripted OpenAI-compatible HTTP server, its base URL): a real server on loopback whose
    replies the test queues (tests/support/scripted_server.py), stopped afterwards."""
    from tests.support.scripted_server import ScriptedServer

    server = ScriptedServer()
    url = server.start()
    yield server, url
    server.stop()
