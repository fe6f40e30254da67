"""``python -m pipelines quality-eval``: held-out precision/recall of the web job's classifiers
on labelled data built from the real sample corpus.

* DCLM classifier — positives: passages of the novels and of documentation prose (trafilatura
  main text); negatives: navigation/chrome regions of the same pages.
* Machine-text detector — SmolLM2 continuations/answers vs the real continuations of the same
  human passages (the generated set is cached under the cache's ai_text/).

The sample corpus is read from the cache (``python -m samples corpus`` puts it there).
"""

from __future__ import annotations

from pathlib import Path

import trafilatura

from core.cache import cache_dir
from core.cached_samples import SampleConfig, sample_corpus
from core.io import iter_jsonl, read_jsonl, write_jsonl_atomic
from core.local_lm import obtain_smollm2
from filters.dclm import FastTextArgs, train_classifier
from filters.extract import boilerplate_text
from filters.machine_text_classifier import build_labelled_set, train_detector
from pipelines.inputs import list_input_files, sample_inputs
from pipelines.jobs.quality_data import passages


def dclm_eval(data_dir: Path | None, pages: int, out: Path, log=print) -> str:
    corpus = sample_corpus(SampleConfig(data_dir=str(cache_dir(data_dir)), max_html_pages=pages))
    books = [b["text"] for b in iter_jsonl(corpus.books_jsonl, "books")]
    prose, chrome = [], []
    for f in list_input_files(sample_inputs(corpus)):
        if f.format != "html":
            continue
        html = Path(f.path).read_text(encoding="utf-8", errors="replace")
        prose.append(trafilatura.extract(html, favor_precision=True) or "")
        if len((b := boilerplate_text(html)).split()) >= 10:
            chrome.append(b)
    pos = list(passages(books, 120))[::10] + list(passages(prose, 120))
    pos = pos[: 3 * len(chrome)]
    report = train_classifier(pos, chrome, out / "dclm.bin", FastTextArgs(), valid_fraction=0.25)
    return f"DCLM classifier ({len(pos)} prose vs {len(chrome)} boilerplate examples): {report}"


def machine_text_eval(data_dir: Path | None, n: int, out: Path, log=print) -> str:
    data_dir = cache_dir(data_dir)
    corpus = sample_corpus(SampleConfig(data_dir=str(data_dir)))
    cache = data_dir / "ai_text" / f"labelled-n{n}.jsonl"
    if not cache.is_file():
        log(f"generating machine text with SmolLM2 for {n} passages (cached in {cache})")
        books = read_jsonl(corpus.books_jsonl, "books")
        rows = build_labelled_set([b["text"] for b in books], [b["title"] for b in books],
                                  obtain_smollm2(data_dir, log=log), n)
        write_jsonl_atomic(cache, rows)
    rows = read_jsonl(cache, "labelled machine-text set")
    report = train_detector(rows, out / "machine_text.bin", valid_fraction=0.3)
    return f"machine-text detector ({len(rows)} examples): {report}"
