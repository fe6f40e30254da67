"""Deep-search tasks on the real sample corpus (the Python 3.11 docs' HTML and its links).

LLM parts (closed-book solver, paraphrase) talk to the scripted HTTP server on 127.0.0.1:
SmolLM2 cannot be steered to a known right or wrong answer, the scripted server can.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.llm import LLMConfig
from synth.search.corpus import load_corpus
from synth.search.generate import Generator, SearchConfig, walk
from synth.search.grade import grade_files, score
from tests.support.scripted_server import Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def docs_corpus(sample_corpus):
    return load_corpus(sample_corpus.html_dir)


@pytest.fixture(scope="session")
def plain_tasks(docs_corpus):
    return Generator(docs_corpus, SearchConfig(seed=3)).generate(4)


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


def test_grader_and_cli(plain_tasks, tmp_path, sample_corpus):
    assert score("Answer: sys", ["sys — System-specific", "sys"]) == 1.0
    assert score("sys, os, re and every other module", ["sys"]) == 0.0
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in plain_tasks.tasks))
    resp = tmp_path / "r.jsonl"
    resp.write_text("".join(json.dumps({"id": t["id"], "response": t["answer"] if i % 2 else "nope"}) + "\n"
                            for i, t in enumerate(plain_tasks.tasks)))
    assert [s for _, s in grade_files(tasks, resp)] == [0.0, 1.0, 0.0, 1.0]
    r = subprocess.run([sys.executable, "-m", "synth.search", "grade", "--tasks", str(tasks), "--responses", str(resp)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "0.500000"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"response": "x"}\n')
    r = subprocess.run([sys.executable, "-m", "synth.search", "grade", "--tasks", str(tasks), "--responses", str(bad)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "has 4 tasks but" in r.stderr and r.stderr.count("\n") == 1


def test_generate_cli_on_jsonl_corpus_with_links(tmp_path):
    # a small linked corpus: hubs link to leaves; words shared so bridges are ambiguous globally
    rows = []
    topics = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    for i, t in enumerate(topics):
        body = " ".join(f"{t} unique marker {i} sentence number {k} about {t}topic matters." for k in range(30))
        # leaf i shares a phrase with leaf i+3 only (a leaf of another hub)
        shared = ["crimson velvet", "golden meadow", "silver harbor"][i % 3] + " appears here."
        rows.append({"id": f"leaf-{t}", "title": f"Leaf {t.title()}", "text": body + " " + shared})
    for h in range(3):
        text = " ".join(f"hub {h} overview paragraph {k} describing things hubword{h}." for k in range(40))
        rows.append({"id": f"hub-{h}", "title": f"Hub {h}", "text": text,
                     "links": [f"leaf-{t}" for t in topics[h * 2:h * 2 + 3]]})
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "synth.search", "generate", "--corpus", str(corpus), "--n", "2",
                        "--out", str(out), "--set", "hops=[2]", "--set", "bridge_min_docs=2",
                        "--set", "min_doc_chars=100"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    tasks = [json.loads(x) for x in out.read_text().splitlines()]
    stats = json.loads(Path(f"{out}.stats.json").read_text())
    assert stats["tasks"] == len(tasks) >= 1 and all(t["supporting_doc_ids"][0].startswith("hub-") for t in tasks)
    corpus.write_text('{"id": 1, "text": "ok"}\nnot json\n')
    r = subprocess.run([sys.executable, "-m", "synth.search", "generate", "--corpus", str(corpus), "--n", "1",
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.strip() == f"error: {corpus}:2: invalid JSON (Expecting value)"


def test_corpus_line_without_text_names_file_and_line(tmp_path):
    from core.errors import InputError

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": 1, "text": "ok"}\n\n{"id": 2, "text": 3}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.jsonl:3: expected an object with 'id' and string 'text'"):
        load_corpus(corpus)
