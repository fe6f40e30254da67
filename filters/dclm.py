"""DCLM-style quality classifier: fastText (wordNgrams 2) trained on high-quality explanatory
text vs random crawl/boilerplate, used to keep the top p% of a corpus.

DCLM ships a fixed score cut-off (0.018112) tuned on its own crawl; a fixed number does not
transfer to another corpus or classifier, so we keep the top p% by a percentile computed
over the corpus being filtered: pass 1 scores every document (``DclmScore``, score in
metadata and the ``dclm_score`` column), a corpus pass computes the threshold
(``DclmThreshold``: exact with DuckDB locally, Spark's ``approxQuantile`` on Spark),
pass 2 keeps documents strictly above it (``DclmKeepTop``).

``python -m filters.dclm train --pos FILE --neg FILE --out MODEL.bin`` trains and prints
held-out precision/recall; ``python -m filters.dclm score --model MODEL.bin --input JSONL``
prints one score per line. A pretrained DCLM ``.bin`` works too (set its positive label).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import Field

from core.config import StrictModel
from core.errors import ConfigError, InputError
from core.io import numbered_jsonl
from core.shipped import FileHandle

POS, NEG = "__label__hq", "__label__cc"


class FastTextArgs(StrictModel):
    """fastText supervised-training arguments (DCLM's recipe: word bigrams)."""

    wordNgrams: int = 2  # noqa: N815 - fastText's own argument names
    epoch: int = 5
    lr: float = 0.1
    dim: int = 100
    minCount: int = 1  # noqa: N815
    # hash buckets for word n-grams: fastText's 2M makes an 800 MB model; small corpora and
    # tests can use far fewer
    bucket: int = Field(default=2_000_000, gt=0)
    # one thread: fastText's multi-threaded SGD is not reproducible run to run
    thread: int = 1
    seed: int = 0


class DclmConfig(StrictModel):
    model_path: str | None = None  # a trained or pretrained .bin; None = train for this job
    positive_label: str = POS
    keep_top_fraction: float = Field(default=0.10, gt=0, le=1)
    # Spark's approxQuantile relative error: the threshold's rank is within ±err·N of exact
    spark_relative_error: float = Field(default=0.001, ge=0, lt=1)
    train: FastTextArgs = FastTextArgs()
    valid_fraction: float = Field(default=0.2, ge=0, lt=1)


def normalize(text: str) -> str:
    # fastText predicts on one line; whitespace runs carry no signal
    return " ".join(text.split())


def read_examples(path: str | Path) -> list[str]:
    """Examples from a ``.jsonl`` (``text`` field) or a plain text file (one per line)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"training file not found: {p}")
    if p.suffix == ".jsonl":
        texts = []
        for n, rec in numbered_jsonl(p, "training"):
            if not isinstance(rec.get("text", ""), str):
                raise InputError(f"{p}:{n}: the text field is not a string")
            texts.append(rec.get("text", ""))
    else:
        with open(p, encoding="utf-8", errors="replace") as fh:
            texts = [line for line in fh if line.strip()]
    out = [normalize(t) for t in texts if normalize(t)]
    if not out:
        raise InputError(f"{p}: no examples")
    return out


@dataclass
class EvalReport:
    precision: float
    recall: float
    f1: float
    n_valid: int
    n_train: int
    accuracy: float = float("nan")
    # accuracy of always answering the held-out set's majority class: the bar to beat
    majority: float = float("nan")

    def __str__(self) -> str:
        return (f"held-out precision {self.precision:.3f}  recall {self.recall:.3f}  F1 {self.f1:.3f}  "
                f"accuracy {self.accuracy:.3f} (majority class {self.majority:.3f})  "
                f"({self.n_valid} held-out / {self.n_train} training examples)")


def precision_recall(predicted: list[bool], actual: list[bool]) -> tuple[float, float, float]:
    tp = sum(p and a for p, a in zip(predicted, actual, strict=True))
    fp = sum(p and not a for p, a in zip(predicted, actual, strict=True))
    fn = sum(a and not p for p, a in zip(predicted, actual, strict=True))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


# fastText's trainer reads memory an earlier training in the same process left behind: the
# fourth of four identical trainings in one process gives a different model, and now and then
# a NaN ("Encountered NaN."), whatever the learning rate. A fresh interpreter per training is
# reproducible, so training runs in a child process that saves the model.
_TRAIN_IN_CHILD = (
    "import json, sys\n"
    "import fasttext\n"
    "try:\n"
    "    model = fasttext.train_supervised(input=sys.argv[1], verbose=0, **json.loads(sys.argv[2]))\n"
    "except RuntimeError as err:\n"
    "    sys.exit(f'fastText: {err}')\n"
    "model.save_model(sys.argv[3])\n"
)


def train_supervised(path: str, args: FastTextArgs, out: str | Path):
    """fastText supervised training of ``path`` into ``out`` (in a child process, see above);
    returns the loaded model. On divergence (NaN: small data and high learning rates) retry
    with half the learning rate, up to three times."""
    import subprocess
    import sys

    params = args.model_dump()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    for _ in range(4):
        proc = subprocess.run([sys.executable, "-c", _TRAIN_IN_CHILD, str(path), json.dumps(params), str(out)],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            return load_model(out)
        err = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        if "NaN" not in err:
            raise InputError(f"fastText training of {path} failed: {err}")
        params["lr"] /= 2
    raise InputError(f"fastText diverged (NaN) even at lr={params['lr'] * 2}; check the training data")


def train_classifier(pos: list[str], neg: list[str], out: str | Path, args: FastTextArgs,
                     valid_fraction: float = 0.2, labels: tuple[str, str] = (POS, NEG),
                     seed: int = 0) -> EvalReport:
    """Train a two-class fastText model, save it to ``out`` and evaluate on a held-out split."""
    rng = random.Random(seed)
    data = [(labels[0], t) for t in pos] + [(labels[1], t) for t in neg]
    rng.shuffle(data)
    n_valid = int(len(data) * valid_fraction)
    valid, train = data[:n_valid], data[n_valid:]
    if not train or {lab for lab, _ in train} != set(labels):
        raise InputError("need training examples of both classes")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as fh:
        for lab, text in train:
            fh.write(f"{lab} {text}\n")
        train_path = fh.name
    try:
        model = train_supervised(train_path, args, out)
    finally:
        Path(train_path).unlink(missing_ok=True)
    if not valid:
        return EvalReport(float("nan"), float("nan"), float("nan"), 0, len(train))
    predicted = [positive_probability(model, t, labels[0]) >= 0.5 for _, t in valid]
    actual = [lab == labels[0] for lab, _ in valid]
    precision, recall, f1 = precision_recall(predicted, actual)
    accuracy = sum(p == a for p, a in zip(predicted, actual, strict=True)) / len(valid)
    majority = max(sum(actual), len(actual) - sum(actual)) / len(valid)
    return EvalReport(precision, recall, f1, len(valid), len(train), accuracy, majority)


def label_probabilities(model, text: str) -> dict[str, float]:
    """Every label's probability for ``text``. For a softmax model (fastText's default, DCLM's):
    the softmax, in float64, of the model's own logits — the hidden vector ``predict`` computes
    (``get_sentence_vector`` for a supervised model) times the output matrix. ``predict`` itself adds
    1e-5 before its log and returns float32, so every score above 1 - 1e-5 came back as exactly 1.0:
    on 3,372 documentation pages 359 did (margins 11.5 to 37.5), more than the top 10% a keep-top
    threshold takes, so the threshold was 1.0, nothing was strictly above it and the web job kept
    nothing. Other losses (hierarchical softmax, negative sampling, one-vs-all) keep ``predict``'s."""
    head = _softmax_head(model)
    if head is None:
        labels, probs = model.predict(normalize(text), k=-1)
        return {lab: float(min(1.0, max(0.0, p))) for lab, p in zip(labels, probs, strict=True)}
    labels, matrix = head
    logits = matrix @ model.get_sentence_vector(normalize(text)).astype(np.float64)
    e = np.exp(logits - logits.max())
    return dict(zip(labels, (e / e.sum()).tolist(), strict=True))


def _softmax_head(model) -> tuple[list[str], np.ndarray] | None:
    """(labels, output matrix as float64) of a softmax model, None for other losses; kept on the model."""
    head = getattr(model, "_glm5_softmax_head", False)
    if head is False:
        head = None
        if model.f.getArgs().loss.name == "softmax":
            matrix = model.get_output_matrix().astype(np.float64)
            labels = model.get_labels()
            head = (labels, matrix) if matrix.shape[0] == len(labels) else None
        model._glm5_softmax_head = head
    return head


def positive_probability(model, text: str, positive_label: str) -> float:
    return label_probabilities(model, text).get(positive_label, 0.0)


def load_model(path: str | Path):
    import fasttext

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"fastText model not found: {p}")
    try:
        return fasttext.load_model(str(p))
    except ValueError as err:
        raise ConfigError(f"{p} is not a fastText model: {err}") from None


class _LazyModel(FileHandle):
    """fastText models do not pickle: steps carry the path and load in each worker."""

    def __init__(self, path: str, load_now: bool = False):
        self.path = path
        self._model = None
        if load_now:  # a bad path fails at construction, not in a worker; the model is kept
            self.model  # noqa: B018

    @property
    def model(self):
        if self._model is None:
            self._model = load_model(self.local_path())
        return self._model

    def __getstate__(self):
        return {"path": self.path, "_model": None}


class DclmScore(BaseFilter):
    """Pass 1: score every document (keeps all); ``dclm_score`` = P(high quality)."""

    name = "🧮 dclm_score"
    stage_name = "dclm_score"
    promotes = {"dclm_score": "float64"}

    def __init__(self, model_path: str | Path, positive_label: str = POS):
        super().__init__()
        self.lazy = _LazyModel(str(model_path), load_now=True)
        self.model_path = str(model_path)
        self.positive_label = positive_label

    def filter(self, doc: Document) -> bool:
        doc.metadata["dclm_score"] = positive_probability(self.lazy.model, doc.text, self.positive_label)
        return True


class DclmKeepTop(BaseFilter):
    """Pass 2: keep documents scored strictly above the corpus threshold."""

    name = "🏆 dclm_keep_top"
    stage_name = "dclm_keep_top"

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        score = doc.metadata.get("dclm_score")
        if score is None:
            return False, "dclm_unscored"
        return score > self.threshold or (False, "dclm_below_top_fraction")


def threshold_quantile(keep_top_fraction: float) -> float | None:
    """The quantile whose value is the keep threshold (None: keep everything)."""
    return None if keep_top_fraction >= 1 else 1.0 - keep_top_fraction


class DclmThreshold:
    """Corpus pass: the keep-top threshold and how it was computed. ``local`` is exact; ``spark``
    uses ``approxQuantile``, which with ``relative_error`` 0 equals ``local``."""

    def __init__(self, keep_top_fraction: float, relative_error: float = 0.0):
        self.keep_top_fraction = keep_top_fraction
        self.relative_error = relative_error

    def local(self, documents_dir: str) -> tuple[float, str]:
        """The ``ceil(q·n)``-th smallest score (DuckDB ``quantile_disc``), q = 1 - top."""
        import duckdb

        method = "exact (DuckDB quantile_disc)"
        q = threshold_quantile(self.keep_top_fraction)
        if q is None:
            return -math.inf, method
        value = duckdb.connect().execute(
            f"SELECT quantile_disc(dclm_score, {q}) FROM read_parquet('{documents_dir}/*.parquet')"
        ).fetchone()[0]
        return (-math.inf if value is None else float(value)), method

    def spark(self, df) -> tuple[float, str]:
        method = f"spark approxQuantile, relative error {self.relative_error}"
        q = threshold_quantile(self.keep_top_fraction)
        if q is None:
            return -math.inf, method
        values = df.filter(df.dclm_score.isNotNull()).approxQuantile("dclm_score", [q], self.relative_error)
        return (float(values[0]) if values else -math.inf), method


# -- CLI ---------------------------------------------------------------------------------------
def _cli():
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help="DCLM fastText quality classifier.")

    @app.command()
    def train(
        pos: Path = typer.Option(..., help="high-quality examples: .jsonl (text field) or one per line"),
        neg: Path = typer.Option(..., help="low-quality examples (crawl, boilerplate), same formats"),
        out: Path = typer.Option(..., help="where to save the model (.bin)"),
        valid_fraction: float = typer.Option(0.2, help="held out for precision/recall"),
        epoch: int = typer.Option(5),
        dim: int = typer.Option(100),
    ) -> None:
        """Train with wordNgrams 2 and print held-out precision/recall."""
        args = FastTextArgs(epoch=epoch, dim=dim)
        report = train_classifier(read_examples(pos), read_examples(neg), out, args, valid_fraction)
        typer.echo(f"saved {out}")
        typer.echo(str(report))

    @app.command()
    def score(
        model: Path = typer.Option(..., help="fastText .bin"),
        input: Path = typer.Option(..., help="JSONL documents (text field)"),
        positive_label: str = typer.Option(POS),
    ) -> None:
        """Print P(high quality) for each document, one per line, in input order."""
        m = load_model(model)
        for n, rec in numbered_jsonl(input, "input"):
            if not isinstance(rec.get("text"), str):
                raise InputError(f"{input}:{n}: no text field")
            typer.echo(f"{positive_probability(m, rec['text'], positive_label):.6f}")

    return app


if __name__ == "__main__":
    from core.cli import run_app

    run_app(_cli())
