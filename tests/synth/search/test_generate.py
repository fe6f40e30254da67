"""synth.search.generate: verified multi-hop tasks on the real sample corpus.

LLM parts (closed-book solver, paraphrase) talk to the scripted HTTP server on 127.0.0.1:
SmolLM2 cannot be steered to a known right or wrong answer, the scripted server can.
"""

from __future__ import annotations

import re

import pytest

from core.llm import LLMConfig
from synth.search.generate import Generator, SearchConfig, walk
from tests.support.scripted_server import Reply, ScriptedServer


def test_tasks_are_verified_multi_hop(docs_corpus, plain_tasks):
    assert len(plain_tasks.tasks) == 4 and {t["hop_count"] for t in plain_tasks.tasks} == {2, 3}
    for t in plain_tasks.tasks:
        ids = t["supporting_doc_ids"]
        assert len(ids) == t["hop_count"] == len(t["hops"])
        for a, b in zip(ids, ids[1:], strict=False):
            assert b in docs_corpus.docs[a].links  # each hop follows a real link
        clues = [h["clue"] for h in t["hops"]]
        assert all(docs_corpus.docs[h["doc_id"]].contains(h["clue"]) for h in t["hops"])
        assert [len(x) for x in walk(clues, docs_corpus)] == [1] * len(ids)  # unique at every hop
        assert docs_corpus.docs[ids[-1]].title == t["answer"]
        # the bridge clues alone are ambiguous over the corpus: a hop cannot be skipped
        assert all(len(docs_corpus.containing(c)) >= 3 for c in clues[1:])
        assert any(x["correct"] for x in t["checks"]["tool_solver"])
        assert t["answer"].lower() not in t["question"].lower()
    assert plain_tasks.attempts >= len(plain_tasks.tasks)


def _server_with_answers(plain_tasks, right: bool) -> ScriptedServer:
    answers = {t["question"]: t["answer"] for t in plain_tasks.tasks}

    def respond(body):
        prompt = body["messages"][-1]["content"]
        q = next((q for q in answers if q in prompt), None)
        text = answers[q] if (q and right) else "I do not know"
        return Reply(body={"choices": [{"message": {"role": "assistant", "content": text}}]})

    srv = ScriptedServer(responder=respond)
    return srv


@pytest.mark.parametrize("right", [True, False])
def test_closed_book_solver_gates_tasks(docs_corpus, plain_tasks, right):
    srv = _server_with_answers(plain_tasks, right)
    url = srv.start()
    try:
        cfg = SearchConfig(seed=3, closed_book_k=2, closed_book_llm=LLMConfig(base_url=url, cache_dir=None))
        res = Generator(docs_corpus, cfg).generate(2, log=lambda m: None) if not right else \
            Generator(docs_corpus, cfg.model_copy(update={"max_attempts_factor": 2})).generate(2)
    finally:
        srv.stop()
    if right:  # a model that knows the answer without tools: every such task is dropped
        assert res.tasks == [] or all(t["question"] not in {p["question"] for p in plain_tasks.tasks}
                                      for t in res.tasks)
        assert res.rejects["answerable_closed_book"] >= 2
    else:
        assert len(res.tasks) == 2
        cb = res.tasks[0]["checks"]["closed_book"]
        assert cb["k"] == 2 and cb["right"] == 0 and len(cb["samples"]) == 2


def test_paraphrase_kept_only_with_every_clue(docs_corpus):
    def respond(body):
        q = body["messages"][-1]["content"].split("\n\n", 1)[1]
        clues = re.findall(r'"([^"]+)"', q)
        if len(clues) == 2:  # a faithful rewrite
            text = f'Which page do you reach from the page containing "{clues[0]}" via its one link to a page with "{clues[1]}"?'
        else:  # drops a clue: must be refused
            text = f'Which page contains "{clues[-1]}"?'
        return Reply(body={"choices": [{"message": {"role": "assistant", "content": text}}]})

    srv = ScriptedServer(responder=respond)
    url = srv.start()
    try:
        cfg = SearchConfig(seed=3, hops=[2, 3], paraphrase_llm=LLMConfig(base_url=url, cache_dir=None))
        res = Generator(docs_corpus, cfg).generate(4)
    finally:
        srv.stop()
    two = [t for t in res.tasks if t["hop_count"] == 2]
    three = [t for t in res.tasks if t["hop_count"] == 3]
    assert two and all(t["question"].startswith("Which page do you reach") for t in two)
    assert three and all(t["question"].startswith("Start at the page") for t in three)
    assert res.paraphrased == len(two) and res.rejects["paraphrase_rejected:paraphrase_dropped_clues"] == len(three)


def test_a_closed_book_endpoint_that_fails_keeps_no_task(docs_corpus):
    """Unanswered samples are no evidence that the model cannot answer: the candidate is rejected as
    inconclusive, never kept (a timed-out local model used to make every candidate pass the check)."""
    srv = ScriptedServer(responder=lambda body: Reply(status=500, body={"error": "overloaded"}))
    url = srv.start()
    try:
        cfg = SearchConfig(seed=3, closed_book_k=2, max_attempts_factor=2,
                           closed_book_llm=LLMConfig(base_url=url, cache_dir=None, max_retries=0))
        res = Generator(docs_corpus, cfg).generate(2, log=lambda m: None)
    finally:
        srv.stop()
    assert res.tasks == [] and res.rejects["closed_book_check_failed"] >= 1
