"""A trainable human-vs-machine text detector (fastText), with a labelled set built from a real
small LM's generations and real human prose. (Known assistant phrases, a rule list, are
``filters.assistant_phrases``.)

Labelled set: human passages are cut into an *opening* and its real *continuation*; the LM
(SmolLM2-135M-Instruct, in process) writes its own continuation of the same opening, and
answers a few instruction prompts. Human examples are the real continuations, machine
examples the generated ones: both sides share topics, so the classifier has to learn style.

``python -m filters.machine_text_classifier build --human FILE --out LABELLED.jsonl`` builds
the set; ``python -m filters.machine_text_classifier train --data LABELLED.jsonl --out MODEL.bin``
trains and prints held-out precision/recall for the "machine" class.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.io import numbered_jsonl, read_jsonl, write_jsonl_atomic
from filters.dclm import (
    EvalReport,
    FastTextArgs,
    _LazyModel,
    positive_probability,
    train_classifier,
)

HUMAN, MACHINE = "__label__human", "__label__machine"
INSTRUCTIONS = [
    "Explain {topic} to a beginner.",
    "Write a short article about {topic}.",
    "What should I know about {topic}?",
    "Give me an overview of {topic} with an example.",
]


class MachineTextConfig(StrictModel):
    model_path: str | None = None
    threshold: float = Field(default=0.9, gt=0, le=1)  # P(machine) at or above which we reject


def split_passage(text: str, opening_words: int = 40, continuation_words: int = 90) -> tuple[str, str] | None:
    words = text.split()
    if len(words) < opening_words + continuation_words // 2:
        return None
    return " ".join(words[:opening_words]), " ".join(words[opening_words:opening_words + continuation_words])


def human_passages(texts: list[str], n: int, seed: int = 0, words: int = 140) -> list[str]:
    """``n`` passages of about ``words`` words, drawn evenly from paragraphs of ``texts``."""
    paras = []
    for t in texts:
        buf: list[str] = []
        for p in re.split(r"\n\s*\n", t):
            buf += p.split()
            if len(buf) >= words:
                paras.append(" ".join(buf[:words]))
                buf = []
    if not paras:
        raise InputError("no passages long enough in the human texts")
    return random.Random(seed).sample(paras, min(n, len(paras)))


def generate_machine_text(openings: list[str], topics: list[str], model_dir: str | Path, max_new_tokens: int = 110,
                          batch_size: int = 16, seed: int = 0, threads: int = 1) -> list[dict]:
    """Continuations of ``openings`` and answers about ``topics`` from the local LM (batched).

    One torch thread by default: for a 135M model the work per op is small, and on a busy
    machine OpenMP's spinning threads make two threads several times slower than one."""
    import torch

    from core.local_lm import load_causal_lm

    model, tok = load_causal_lm(model_dir, threads=threads)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    prompts = [("continuation", o) for o in openings]
    rng = random.Random(seed)
    for t in topics:
        msg = [{"role": "user", "content": rng.choice(INSTRUCTIONS).format(topic=t)}]
        prompts.append(("instruction", tok.apply_chat_template(msg, add_generation_prompt=True, tokenize=False)))
    out = []
    torch.manual_seed(seed)
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i : i + batch_size]
        enc = tok([p for _, p in batch], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=True, temperature=0.8, top_p=0.95,
                                 pad_token_id=tok.pad_token_id)
        for (kind, prompt), seq in zip(batch, gen, strict=True):
            text = tok.decode(seq[enc["input_ids"].shape[1]:], skip_special_tokens=True).strip()
            if len(text.split()) >= 20:
                out.append({"kind": kind, "prompt": prompt[-200:], "text": text})
    return out


def build_labelled_set(human_texts: list[str], topics: list[str], model_dir: str | Path, n: int,
                       seed: int = 0) -> list[dict]:
    pairs = [p for p in (split_passage(x) for x in human_passages(human_texts, n, seed)) if p]
    n_instr = min(len(topics), max(1, n // 4))
    machine = generate_machine_text([o for o, _ in pairs], random.Random(seed).sample(topics, n_instr), model_dir,
                                    seed=seed)
    human = [{"label": "human", "text": c} for _, c in pairs]
    return human + [{"label": "machine", "text": m["text"], "kind": m["kind"]} for m in machine]


def train_detector(labelled: list[dict], out: str | Path, valid_fraction: float = 0.25,
                   args: FastTextArgs | None = None) -> EvalReport:
    machine = [r["text"] for r in labelled if r["label"] == "machine"]
    human = [r["text"] for r in labelled if r["label"] == "human"]
    # labelled sets here are small (a few hundred texts): many passes at a high rate
    return train_classifier(machine, human, out, args or FastTextArgs(epoch=50, lr=0.5), valid_fraction,
                            labels=(MACHINE, HUMAN))


class MachineText(BaseFilter):
    name = "🤖 machine_text"
    stage_name = "machine_text"
    promotes = {"ai_score": "float64"}

    def __init__(self, model_path: str | Path, threshold: float = 0.9):
        super().__init__()
        self.lazy = _LazyModel(str(model_path), load_now=True)
        self.threshold = threshold

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        p = positive_probability(self.lazy.model, doc.text, MACHINE)
        doc.metadata["ai_score"] = p
        return p < self.threshold or (False, "machine_generated")


def _cli():
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help="Human vs machine text detector.")

    @app.command()
    def build(
        human: list[Path] = typer.Option(..., help="JSONL files of human documents (text field); repeatable"),
        out: Path = typer.Option(..., help="labelled set to write (JSONL: label, text)"),
        n: int = typer.Option(120, help="human passages (about as many machine texts are generated)"),
        data_dir: Path = typer.Option(None, help="cache for the SmolLM2 model (default: the user cache)"),
        seed: int = typer.Option(0),
    ) -> None:
        """Generate machine text with SmolLM2 and pair it with human passages."""
        from core.local_lm import obtain_smollm2

        texts, topics = [], []
        for path in human:
            for n, rec in numbered_jsonl(path, "human passages"):
                if not isinstance(rec.get("text"), str):
                    raise InputError(f"{path}:{n}: no text field")
                texts.append(rec["text"])
                topics.append(rec.get("title") or " ".join(rec["text"].split()[:6]))
        rows = build_labelled_set(texts, topics, obtain_smollm2(data_dir), n, seed)
        write_jsonl_atomic(out, rows)
        typer.echo(f"wrote {len(rows)} examples to {out}")

    @app.command()
    def train(
        data: Path = typer.Option(..., help="labelled set from `build`"),
        out: Path = typer.Option(..., help="model .bin to write"),
        valid_fraction: float = typer.Option(0.25),
    ) -> None:
        """Train the detector; print held-out precision/recall of the machine class."""
        rows = read_jsonl(data, "labelled set")
        report = train_detector(rows, out, valid_fraction)
        typer.echo(f"saved {out}")
        typer.echo(f"machine-text detector: {report}")

    return app


if __name__ == "__main__":
    from core.cli import run_app

    run_app(_cli())
