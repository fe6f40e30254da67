r"""HTML -> text backends of the web job's extraction step, side by side on real labelled pages:
Resiliparse vs trafilatura (datatrove's extractor), each as ``filters.extract.HtmlToText`` runs it
(datatrove's extractor sandbox, the job's settings).

Pages and labels: trafilatura 1.0.0's test pages (``samples.extraction_eval``: 84 real news, blog
and shop pages, mostly German, with 212 text and 223 boilerplate segments its tests assert).
Scored as trafilatura's evaluation scores its own benchmark: a text segment found is a true
positive, missed a false negative; a boilerplate segment found is a false positive, absent a true
negative; precision, recall, F1 and accuracy over all segments. trafilatura's published
evaluation set (750 pages) ships in no release on the package index; these pages are its
regression tests, written to pass with trafilatura, so its figures here are optimistic.
``also`` scores the segments the tests leave commented out as well (mostly ones trafilatura missed).

Throughput: pages per CPU second of this process and its reaped children (the sandbox is a child
process), the best of ``--rounds`` interleaved rounds. Writes out/bench/extractors.json.
Run: `python benchmarks/extractors.py [--rounds R]`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datatrove.data import Document  # noqa: E402

from benchmarks._report import Result, cpu_seconds, write  # noqa: E402
from filters.extract import BACKENDS, HtmlToText  # noqa: E402
from pipelines.charset import decode_page  # noqa: E402
from pipelines.jobs.web import WebConfig  # noqa: E402
from samples.extraction_eval import LabelledPage, obtain_extraction_eval  # noqa: E402


def score(pages: list[LabelledPage], texts: list[str], commented: bool = False) -> dict[str, float]:
    """trafilatura's evaluation counts over every labelled segment of every page (a page with
    no text extracted finds nothing)."""
    tp = fn = fp = tn = 0
    for page, text in zip(pages, texts, strict=True):
        for seg in page.segments:
            if seg.commented and not commented:
                continue
            found = seg.text in text
            if seg.expected:
                tp, fn = tp + found, fn + (not found)
            else:
                fp, tn = fp + found, tn + (not found)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": round((tp + tn) / max(tp + fn + fp + tn, 1), 4), "tp": tp, "fn": fn, "fp": fp, "tn": tn}


def extract_all(step: HtmlToText, htmls: list[str]) -> tuple[list[str], float]:
    """Every page through the step (a dropped page: ''), and the CPU seconds it took."""
    docs = [Document(text=h, id=str(i), metadata={"content_type": "text/html"}) for i, h in enumerate(htmls)]
    t0 = cpu_seconds()
    out = {d.id: d.text for d in step.run(iter(docs)) if not d.metadata.get("filter_reason")}
    return [out.get(str(i), "") for i in range(len(htmls))], cpu_seconds() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    folder, pages = obtain_extraction_eval(ROOT / "data")
    # decoded as the web job's reader decodes an undeclared page (meta charset, then detection)
    htmls = [decode_page((folder / p.file).read_bytes(), None).text for p in pages]
    cfg = WebConfig()
    best: dict[str, float] = {}
    texts: dict[str, list[str]] = {}
    for _ in range(args.rounds):  # interleaved: a load spike hits both alike
        for backend in BACKENDS:
            texts[backend], seconds = extract_all(HtmlToText(timeout=cfg.extract_timeout_s, backend=backend), htmls)
            best[backend] = min(best.get(backend, float("inf")), seconds)
    rate = {b: len(htmls) / best[b] for b in BACKENDS}
    asserted = {b: score(pages, texts[b]) for b in BACKENDS}
    everything = {b: score(pages, texts[b], commented=True) for b in BACKENDS}
    empty = {b: sum(not t.strip() for t in texts[b]) for b in BACKENDS}
    for b in BACKENDS:
        print(f"{b:12s} {rate[b]:7.1f} pages/CPU-s  asserted {asserted[b]}  with commented {everything[b]}  "
              f"no text: {empty[b]}")
    ours, base = cfg.extract_backend, next(b for b in BACKENDS if b != cfg.extract_backend)
    labels = {"ours_label": f"HtmlToText(backend={ours}) (the web job's default)",
              "baseline_label": f"HtmlToText(backend={base})"}
    segs = [s for p in pages for s in p.segments]
    inputs = {"pages": len(pages), "text_segments": sum(s.expected and not s.commented for s in segs),
              "boilerplate_segments": sum(not s.expected and not s.commented for s in segs),
              "commented_segments": sum(s.commented for s in segs), "rounds": args.rounds,
              "source": "trafilatura 1.0.0 sdist: tests/cache pages, tests/realworld_tests.py assertions"}
    headline = Result("extraction throughput", rate[ours], rate[base], "pages/CPU-s", **labels,
                      extra={"pages_without_text": empty})
    also = [Result("extraction F1 (asserted segments)", asserted[ours]["f1"], asserted[base]["f1"], "F1", **labels,
                   extra={"scores": asserted}),
            Result("extraction F1 (with commented-out segments)", everything[ours]["f1"], everything[base]["f1"],
                   "F1", **labels, extra={"scores": everything})]
    write(__file__, headline, inputs, also)


if __name__ == "__main__":
    main()
