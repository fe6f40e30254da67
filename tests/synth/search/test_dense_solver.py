"""The dense solver (synth/search/dense_solver.py): a grade independent of the checks that kept a task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from synth.search.corpus import Corpus, Doc
from synth.search.dense_solver import DenseSolver
from synth.search.generate import SearchConfig

ROOT = Path(__file__).resolve().parents[3]


def test_it_starts_at_the_closest_page_and_follows_the_closest_link():
    docs = {
        "a": Doc("a", "Sorting lists", "How to sort a list of numbers in place with a key function. " * 5, ["b", "c"]),
        "b": Doc("b", "Timsort details", "The merge algorithm galloping mode and run detection of timsort. " * 5),
        "c": Doc("c", "Sockets", "Opening a TCP connection to a server and sending bytes over it. " * 5),
        "d": Doc("d", "Regular expressions", "Patterns, groups and the match object of the re module. " * 5),
    }
    solver = DenseSolver(Corpus(docs))
    # two quoted phrases: two pages; the question is about sorting and timsort's galloping
    assert solver.solve('Which page, linked from "sort a list in place", explains "galloping mode"?') == "Timsort details"
    assert solver.solve('What explains "match object" groups of regular expression patterns?') == "Regular expressions"


def test_solve_cli_grades_the_dense_solver_by_default(plain_tasks, tmp_path, sample_corpus):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in plain_tasks.tasks))
    out = tmp_path / "dense.jsonl"
    r = subprocess.run([sys.executable, "-m", "synth.search", "solve", "--tasks", str(tasks), "--corpus",
                        str(sample_corpus.html_dir), "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "dense responses" in r.stdout, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    titles = {d.title for d in __import__("synth.search.corpus", fromlist=["load_corpus"]).load_corpus(
        sample_corpus.html_dir).docs.values()}
    assert len(rows) == len(plain_tasks.tasks) and all(row["response"] in titles for row in rows)
    bad = subprocess.run([sys.executable, "-m", "synth.search", "solve", "--tasks", str(tasks), "--corpus",
                          str(sample_corpus.html_dir), "--out", str(out), "--solver", "gpt"], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--solver" in bad.stderr


def test_the_shipped_config_keeps_only_tasks_a_local_model_fails_closed_book():
    cfg = SearchConfig.model_validate(yaml.safe_load((ROOT / "configs" / "terminal_search.yaml").read_text()))
    assert cfg.closed_book_local and cfg.closed_book_llm is None and cfg.closed_book_k >= 4
