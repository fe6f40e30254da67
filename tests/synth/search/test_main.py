"""python -m synth.search: grade and generate on the command line, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from synth.search.grade import grade_files, score

ROOT = Path(__file__).resolve().parents[3]


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
