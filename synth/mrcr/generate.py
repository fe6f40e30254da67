"""MRCR-like samples: find the k-th of several identical requests in a long conversation.

Like OpenAI-MRCR, a conversation holds ``n_needles`` turns with the *same* user request
("Quote a passage from Emma.") among many distractor turns (other requests, some about the
same document in other words — hard negatives). Every reply is a real paragraph of the
sample corpus. The last user turn asks the model to prepend a random string to one of the
needle replies. Variants:

* ``kth_from_start``: the k-th needle reply (1 indexed);
* ``kth_from_end``: the k-th needle reply counting from the last;
* ``multi_ask``: two needle replies, in the order asked, joined by a blank line.

Fields follow OpenAI-MRCR (``prompt`` as a list of chat messages, ``answer``,
``random_string_to_prepend``, ``n_needles``, ``desired_msg_index``, ``total_messages``,
``n_chars``) plus ``variant``, ``length`` (in the caller's unit), ``bin`` and
``desired_msg_indices``. Lengths target a bin; the caller's ``length_fn`` (characters by
default, tokens in the pipeline) measures them.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from core.config import StrictModel
from core.errors import InputError
from synth.mrcr.passages import PassageConfig

Variant = Literal["kth_from_start", "kth_from_end", "multi_ask"]
VARIANTS: tuple[str, ...] = ("kth_from_start", "kth_from_end", "multi_ask")

REQUEST_TEMPLATES = (
    "Quote a passage from {title}.",
    "Share an excerpt from {title}.",
    "Give me a paragraph from {title}.",
    "Recite a short section of {title}.",
)


class MrcrConfig(StrictModel):
    needles: list[int] = [2, 4, 8]
    variants: list[Variant] = list(VARIANTS)
    # [lo, hi) total prompt length per bin, in length_fn units (characters by default)
    bins: list[tuple[int, int]] = [(4000, 8000), (8000, 16000), (16000, 32000)]
    random_string_chars: int = Field(default=10, ge=4)
    # share of distractor turns about the needle's own document in other words (hard negatives)
    hard_negative_rate: float = Field(default=0.25, ge=0, le=1)
    passages: PassageConfig = PassageConfig()
    seed: int = 0

    @field_validator("needles")
    @classmethod
    def _needles(cls, v: list[int]) -> list[int]:
        if not v or any(n < 2 for n in v):
            raise ValueError("needles must be a non-empty list of counts >= 2")
        return v

    @field_validator("bins")
    @classmethod
    def _bins(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not v or any(not 0 < lo < hi for lo, hi in v):
            raise ValueError("bins must be non-empty [lo, hi) pairs with 0 < lo < hi")
        return v


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def final_question(variant: str, request: str, ks: list[int], rs: str) -> str:
    quoted = f'the request "{request}"'
    if variant == "kth_from_start":
        what = f"the {ordinal(ks[0])} (1 indexed) response to {quoted}"
    elif variant == "kth_from_end":
        what = f"the {ordinal(ks[0])} response counting from the end (1 = the last one) to {quoted}"
    else:
        what = (
            f"the {ordinal(ks[0])} and the {ordinal(ks[1])} (1 indexed) responses to {quoted}, "
            f"in that order, joined by a blank line"
        )
    return f"Prepend {rs} to {what}. Do not include any other text in your response."


def _needle_numbers(variant: str, n: int, rng: np.random.Generator) -> tuple[list[int], list[int]]:
    """(the k's stated in the question, the 0-based needle indices they mean)."""
    if variant == "kth_from_start":
        k = int(rng.integers(1, n + 1))
        return [k], [k - 1]
    if variant == "kth_from_end":
        k = int(rng.integers(1, n + 1))
        return [k], [n - k]
    a, b = (int(x) for x in rng.choice(np.arange(1, n + 1), 2, replace=False))
    return [a, b], [a - 1, b - 1]


def generate_sample(
    pool: dict[str, list[str]],
    n_needles: int,
    variant: str,
    bin_: tuple[int, int],
    rng: np.random.Generator,
    cfg: MrcrConfig,
    length_fn: Callable[[str], int] = len,
    bins: Sequence[tuple[int, int]] | None = None,
) -> dict:
    """One sample aimed at ``bin_``; its ``bin`` label is where its length landed among ``bins``
    (the list ``bin_`` came from: ``cfg.bins`` in characters unless given, e.g. token bins)."""
    titles = [t for t, ps in pool.items() if len(ps) > n_needles]
    if not titles:
        raise InputError(
            f"no document has more than {n_needles} paragraphs: cannot place {n_needles} needles"
        )
    title = titles[int(rng.integers(len(titles)))]
    request = REQUEST_TEMPLATES[int(rng.integers(len(REQUEST_TEMPLATES)))].format(title=title)
    picks = rng.choice(len(pool[title]), n_needles, replace=False)
    needles = [pool[title][int(i)] for i in picks]
    alphabet = np.array(list(string.ascii_letters + string.digits))
    rs = "".join(rng.choice(alphabet, cfg.random_string_chars))
    ks, which = _needle_numbers(variant, n_needles, rng)
    question = final_question(variant, request, ks, rs)

    lo, hi = bin_
    target = int(rng.integers(lo, hi))
    used = sum(length_fn(request) + length_fn(r) for r in needles) + length_fn(question)
    all_titles = list(pool)
    distractors: list[tuple[str, str]] = []
    misses = 0
    while used < target and misses < 20:
        hard = rng.random() < cfg.hard_negative_rate
        t = title if hard else all_titles[int(rng.integers(len(all_titles)))]
        req = REQUEST_TEMPLATES[int(rng.integers(len(REQUEST_TEMPLATES)))].format(title=t)
        reply = pool[t][int(rng.integers(len(pool[t])))]
        size = length_fn(req) + length_fn(reply)
        if req == request or reply in needles or used + size >= hi:
            misses += 1  # (in a row) the needle request itself, a needle's text, or past the bin: draw again
            continue
        distractors.append((req, reply))
        used += size
        misses = 0
    turns = len(distractors) + n_needles
    needle_turns = set(rng.choice(turns, n_needles, replace=False).tolist())
    messages: list[dict[str, str]] = []
    needle_msg_index: list[int] = []
    it_needles, it_distractors = iter(needles), iter(distractors)
    for turn in range(turns):
        if turn in needle_turns:
            messages.append({"role": "user", "content": request})
            needle_msg_index.append(len(messages))
            messages.append({"role": "assistant", "content": next(it_needles)})
        else:
            req, reply = next(it_distractors)
            messages += [{"role": "user", "content": req}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": question})
    answer = rs + "\n\n".join(needles[i] for i in which)
    length = used
    bin_label = next((f"{a}-{b}" for a, b in (cfg.bins if bins is None else bins) if a <= length < b), None)
    if bin_label is None:  # too little text to reach the bin, or needles alone overshoot it
        bin_label = f"under-{lo}" if length < lo else f"over-{hi}"
    return {
        "prompt": messages,
        "answer": answer,
        "random_string_to_prepend": rs,
        "n_needles": n_needles,
        "desired_msg_index": needle_msg_index[which[0]],
        "desired_msg_indices": [needle_msg_index[i] for i in which],
        "total_messages": len(messages),
        "n_chars": sum(len(m["content"]) for m in messages),
        "variant": variant,
        "needle_request": request,
        "length": length,
        "bin": bin_label,
    }


def generate(
    pool: dict[str, list[str]], n: int, cfg: MrcrConfig, length_fn: Callable[[str], int] = len
) -> list[dict]:
    """``n`` samples cycling through needle counts x variants x bins, reproducible by seed."""
    rng = np.random.default_rng(cfg.seed)
    out = []
    for i in range(n):
        needles, variant, bin_ = plan(i, cfg, cfg.bins)
        out.append(generate_sample(pool, needles, variant, bin_, rng, cfg, length_fn))
    return out


def plan(i: int, cfg: MrcrConfig, bins: Sequence[tuple[int, int]]) -> tuple[int, str, tuple[int, int]]:
    """The i-th sample's needle count, variant and length bin: cycling through all three."""
    needles = cfg.needles[i % len(cfg.needles)]
    variant = cfg.variants[(i // len(cfg.needles)) % len(cfg.variants)]
    return needles, variant, bins[(i // (len(cfg.needles) * len(cfg.variants))) % len(bins)]


def render_chat(messages: list[dict[str, str]]) -> str:
    """The conversation as training text; the answer follows an open assistant turn."""
    parts = [f"<|{m['role']}|>\n{m['content']}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"
