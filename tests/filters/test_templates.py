"""Template detection measured on a labelled set built from real text: "stamped" pages
(one skeleton of boilerplate lines, a real sentence filled in) among real passages."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datatrove.data import Document

from filters.dclm import precision_recall
from filters.templates import (
    TemplateConfig,
    Templated,
    TemplateLines,
    normalize_line,
)
from pipelines.jobs.quality_data import passages

SKELETON = [
    "Welcome to our online catalogue of rare books and collectibles, updated daily.",
    "Item number {n} is available for immediate dispatch from our warehouse.",
    "Customers who viewed this item also viewed the following related items.",
    "Free shipping on all orders over 50 dollars within the continental United States.",
    "Copyright {n} Example Books Ltd. All rights reserved. Terms and conditions apply.",
]


@pytest.fixture(scope="module")
def labelled(sample_corpus, tmp_path_factory):
    books = [json.loads(x)["text"] for x in sample_corpus.books_jsonl.read_text().splitlines()]
    real = list(passages(books, 80))[::50][:60]
    rng = random.Random(0)
    stamped = []
    for _ in range(40):
        lines = [s.format(n=rng.randint(1, 9999)) for s in SKELETON]
        sentence = rng.choice(real).split(". ")[0][:120]
        lines.insert(2, sentence)
        stamped.append("\n".join(lines))
    docs = [(f"real{i}", t, "site-a" if i % 2 else "site-b") for i, t in enumerate(real)]
    docs += [(f"tmpl{i}", t, f"shop{i % 3}") for i, t in enumerate(stamped)]
    d = tmp_path_factory.mktemp("tmpl") / "docs"
    d.mkdir()
    pq.write_table(pa.table({"id": [x[0] for x in docs], "text": [x[1] for x in docs],
                             "metadata": [json.dumps({"url": f"https://{x[2]}.example/{x[0]}"}) for x in docs]}),
                   d / "00000.parquet")
    return d, docs


def test_normalisation_folds_digits_case_and_space():
    assert normalize_line("  Item NUMBER 42   is\tready ") == normalize_line("item number 7 is ready")


def test_detects_stamped_pages_with_high_precision_and_recall(labelled):
    d, docs = labelled
    cfg = TemplateConfig(min_docs=10, min_sites=2, min_line_chars=30)
    keys = TemplateLines(cfg).local(str(d))
    assert 4 <= len(keys) <= 6  # the skeleton's lines (digits folded), nothing from real prose
    step = Templated(keys, cfg)
    flagged = [step.filter(Document(text=t, id=i)) is not True for i, t, _ in docs]
    precision, recall, _ = precision_recall(flagged, [i.startswith("tmpl") for i, _, _ in docs])
    assert precision == 1.0 and recall == 1.0
    one_site = TemplateLines(cfg.model_copy(update={"min_sites": 4})).local(str(d))
    assert one_site == set()  # the stamped pages come from 3 sites only


@pytest.mark.spark
def test_spark_finds_the_same_template_lines(labelled, spark):
    d, _ = labelled
    for cfg in (TemplateConfig(min_docs=10, min_sites=2), TemplateConfig(min_docs=3, min_line_chars=10)):
        assert TemplateLines(cfg).spark(spark.read.parquet(str(d))) == TemplateLines(cfg).local(str(d))
