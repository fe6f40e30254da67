import json
import math
import socket

import pytest
from datatrove.data import Document

from core.llm import LLMConfig
from core.records import REJECT_DETAIL_KEY, get_reject
from filters.edu import (
    EduConfig,
    EduScore,
    EduThreshold,
    TokenCounter,
    aggregate,
    chunk_spans,
    expected_digit_score,
    parse_text_score,
)
from pipelines.chain import StepChain, check_balanced
from tests.support.scripted_server import Reply, ScriptedServer


def test_chunks_cover_all_text_and_respect_the_token_bound(sample_corpus, smollm2_dir):
    book = json.loads(sample_corpus.books_jsonl.read_text().splitlines()[0])["text"][:200_000]
    for counter, limit in ((TokenCounter(None), 300), (TokenCounter(str(smollm2_dir / "tokenizer.json")), 512)):
        spans = chunk_spans(book, limit, counter)
        assert "".join(book[a:b] for a, b in spans) == book  # 100% of the text, in order
        assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
        sizes = [len(counter.offsets(book[a:b])) for a, b in spans]
        assert max(sizes) <= limit * 1.02 and len(spans) > 10
        assert sum(sizes) >= len(counter.offsets(book)) * 0.98
    one_long_line = "word " * 2000
    spans = chunk_spans(one_long_line, 300, TokenCounter(None))
    assert [len(one_long_line[a:b].split()) for a, b in spans] == [300] * 6 + [200]


def test_parsing_expected_score_and_aggregation():
    assert parse_text_score("Good intro.\nEducational score: 4") == 4.0
    assert parse_text_score("points... Educational Score: **3**") == 3.0
    assert parse_text_score("no score here") is None
    assert expected_digit_score({" 3": math.log(0.5), "4": math.log(0.25), " the": math.log(0.25)}) == pytest.approx(10 / 3)
    assert expected_digit_score({"the": -0.1}) is None
    s, t = [1.0, 5.0, 3.0], [100, 10, 10]
    assert aggregate(s, t, "mean") == 3.0
    assert aggregate(s, t, "length_weighted") == pytest.approx((100 + 50 + 30) / 120)
    assert aggregate(s, t, "max") == 5.0
    assert aggregate(s, t, "top_k_mean", top_k=2) == 4.0


def scripted(server_reply=None):
    s = ScriptedServer()
    if server_reply:
        s.responder = server_reply
    return s, s.start()


def edu_cfg(url, **kw):
    llm = LLMConfig(base_url=url, model="m", cache_dir=None, max_retries=2, backoff_s=0.01, timeout_s=5)
    return EduConfig(llm=llm, **kw)


def text_reply(body):
    # a scripted "model": long chunks are educational, short ones are not
    prompt = body["messages"][0]["content"]
    score = 4 if len(prompt) > 1500 else 1
    return Reply(body={"choices": [{"index": 0, "message": {"role": "assistant",
                                                             "content": f"Some reasoning.\nEducational score: {score}"}}]})


def test_text_mode_scores_every_chunk_and_aggregates():
    s, url = scripted(text_reply)
    try:
        step = EduScore(edu_cfg(url, mode="text", route="chat", max_chunk_tokens=100, aggregation="mean"))
        doc = Document(text=("A long paragraph " * 90 + "\n\n") * 3 + "short tail", id="d")
        [out] = list(StepChain([step]).process([doc]))
        m = out.metadata
        assert len(m["edu_chunk_scores"]) == len(s.received) == len(m["edu_chunk_tokens"]) >= 6
        assert sum(m["edu_chunk_tokens"]) == len(doc.text.split())
        assert m["edu_score"] == pytest.approx(sum(m["edu_chunk_scores"]) / len(m["edu_chunk_scores"]))
        assert m["edu_aggregation"] == "mean" and m["edu_mode"] == "text" and m["edu_source"] == "llm"
        assert all(r["messages"][0]["content"].endswith('"Educational score: <points>".') for r in s.received)
        sent = len(s.received)
        [empty] = list(StepChain([step]).process([Document(text="", id="e")]))
        assert get_reject(empty) == ("edu_score", "edu_empty_text") and len(s.received) == sent
    finally:
        s.stop()


def test_endpoint_failures_leave_documents_unscored_not_lost():
    s, url = scripted(lambda body: Reply(status=500))
    s.script.extend([Reply(status=503), Reply(raw=b"garbage")])  # then the responder's 500s
    try:
        docs = [Document(text=f"document {i} " * 50, id=f"d{i}") for i in range(5)]
        chain = StepChain([EduScore(edu_cfg(url, mode="text", route="chat")), EduThreshold(3)])
        out = list(chain.process(docs))
        assert sorted(d.id for d in out) == [f"d{i}" for i in range(5)]
        for d in out:
            assert get_reject(d) == ("edu_score", "edu_unscored")
            assert f"{url}/chat/completions: http_500 after 3 attempt(s)" in d.metadata[REJECT_DETAIL_KEY]
        check_balanced(chain.counts, chain.stages)
    finally:
        s.stop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    dead = f"http://127.0.0.1:{port}/v1"
    [d] = list(StepChain([EduScore(edu_cfg(dead))]).process([Document(text="x " * 10, id="z")]))
    assert get_reject(d)[1] == "edu_unscored" and dead in d.metadata[REJECT_DETAIL_KEY]


def test_select_scores_only_a_sample():
    s, url = scripted(text_reply)
    try:
        step = EduScore(edu_cfg(url, mode="text", route="chat"), select=lambda d: d.id.endswith("0"))
        out = list(StepChain([step]).process([Document(text="words " * 30, id=f"d{i}") for i in range(4)]))
        scored = {d.id for d in out if "edu_score" in d.metadata}
        assert scored == {"d0"} and all(get_reject(d) is None for d in out)
    finally:
        s.stop()


def test_logprobs_mode_with_the_real_model(llm_server, sample_corpus, smollm2_dir):
    """SmolLM2 scores real documentation prose above navigation boilerplate."""
    from filters.extract import boilerplate_text

    html = (sample_corpus.html_dir / "tutorial" / "classes.html").read_text()
    import trafilatura

    prose = trafilatura.extract(html)[:1600]
    nav = boilerplate_text(html)[:800]
    cfg = EduConfig(llm=LLMConfig(base_url=llm_server, model="smollm2", cache_dir=None),
                    tokenizer_path=str(smollm2_dir / "tokenizer.json"), max_chunk_tokens=256)
    chain = StepChain([EduScore(cfg)])
    out = {d.id: d for d in chain.process([Document(text=prose, id="prose"), Document(text=nav, id="nav")])}
    for d in out.values():
        m = d.metadata
        assert 0 <= m["edu_score"] <= 5 and len(m["edu_chunk_scores"]) == len(m["edu_chunk_tokens"])
        assert max(m["edu_chunk_tokens"]) <= 256 * 1.02
    assert len(out["prose"].metadata["edu_chunk_scores"]) >= 2
    assert out["prose"].metadata["edu_score"] > out["nav"].metadata["edu_score"]
