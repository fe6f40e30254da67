"""One token-level sample stream per long-context mixture component, ready for the packer.

Each stream turns what ``synth/`` builds (natural documents, NExtLong interleaving, EntropyLong
samples, MRCR conversations) into int32 token arrays of the packing tokenizer, sized in its
tokens: a sample that cannot reach or fit its target is skipped and counted with a reason
(``skips``), never silently lost. Items are ``Sample``s for whole samples (never cut by the
packer) and ``(pieces, metadata)`` for documents that stream across sequences.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from core.tokenizer import count_tokens, encode_pieces
from synth.catalog import DocumentCatalog
from synth.entropylong import EntropyLongSample
from synth.interleave import InterleaveConfig, TargetUnreachable, TooShort, interleave_document
from synth.mrcr import MrcrConfig, generate_sample, render_chat
from synth.mrcr.generate import plan
from synth.retrieval import ChunkIndex

# (token arrays of one sample, its metadata for samples.jsonl, the MRCR row if it is one)
Sample = tuple[list[np.ndarray], dict[str, Any], dict | None]


def natural_docs(
    catalog: DocumentCatalog, ids: list[str], tok: Tokenizer
) -> Iterator[tuple[Iterator[np.ndarray], dict]]:
    for doc_id, text in catalog.texts(ids):
        yield encode_pieces(tok, text), {"doc_id": doc_id, "doc_tokens": catalog.by_id[doc_id].n_tokens}


def interleaved_samples(
    catalog: DocumentCatalog,
    ids: list[str],
    index: ChunkIndex,
    target: int,
    tok: Tokenizer,
    cfg: InterleaveConfig,
    skips: Counter,
    notes: dict[str, str],
) -> Iterator[Sample]:
    """One exactly-``target``-token NExtLong sample per source document that can reach it."""

    def lengths(texts: list[str]) -> list[int]:
        return count_tokens(tok, texts)

    for doc_id, text in catalog.texts(ids):
        try:
            sample = interleave_document(doc_id, text, index, target, lengths, cfg)
        except (TooShort, TargetUnreachable) as err:
            reason = "shorter_than_chunk" if isinstance(err, TooShort) else "target_unreachable"
            skips[reason] += 1
            notes.setdefault(reason, str(err))  # the first message says how far it got
            continue
        encs = tok.encode_batch_fast([s.text for s in sample.segments], add_special_tokens=False)
        for seg, enc in zip(sample.segments, encs, strict=True):
            seg.length = len(enc.ids)  # exact: the index's lengths came from the same tokenizer
        pairs = [
            (seg, np.asarray(e.ids, dtype=np.int32)) for seg, e in zip(sample.segments, encs, strict=True)
        ]
        sample.trim_to(target)  # overshoot comes off the last distractors, never an original
        if sample.length != target:
            skips["length_mismatch"] += 1
            continue
        kept = {id(seg) for seg in sample.segments}
        segs = [(seg, a) for seg, a in pairs if id(seg) in kept]
        meta = sample.metadata()
        meta["original_chunks"] = [seg.chunk_index for seg, _ in segs if seg.kind == "original"]
        yield [a[: seg.length] for seg, a in segs], meta, None


def entropylong_parts(samples: list[EntropyLongSample], target: int, tok: Tokenizer) -> Iterator[Sample]:
    """Verified contexts (most useful first) + the document. Too long for the sequence: the
    least useful contexts go first, then the start of the one left."""
    for s in samples:
        if not s.kept:
            continue
        texts = [t for t, *_ in s.segments()]
        arrays = [np.asarray(e.ids, np.int32) for e in tok.encode_batch_fast(texts, add_special_tokens=False)]
        contexts, doc = arrays[:-1], arrays[-1][-target:]
        while len(contexts) > 1 and sum(map(len, contexts)) + len(doc) > target:
            contexts.pop()  # the weakest verified context sits right before the document
        over = sum(map(len, contexts)) + len(doc) - target
        if over > 0:
            contexts[0] = contexts[0][over:]
        contexts = [c for c in contexts if len(c)]
        start = sum(map(len, contexts))
        meta = s.metadata() | {"contexts_packed": len(contexts), "doc_span": [start, start + len(doc)]}
        yield [*contexts, doc], meta, None


def mrcr_parts(
    pool: dict[str, list[str]],
    bins: list[tuple[int, int]],
    target: int,
    tok: Tokenizer,
    cfg: MrcrConfig,
    rng: np.random.Generator,
    skips: Counter,
) -> Iterator[Sample]:
    """MRCR samples sized in tokens (prompt + answer within ``target``), endlessly."""

    @functools.lru_cache(maxsize=65536)  # distractor paragraphs are drawn again and again
    def n_tokens(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    # a needle count no document has enough paragraphs for is skipped and counted, not fatal,
    # unless no configured count fits (then generate_sample's error names the problem)
    most = max((len(ps) for ps in pool.values()), default=0)
    placeable = any(n < most for n in cfg.needles)
    i = misses = 0
    while misses < 50:  # a pool whose samples never fit would otherwise loop forever
        needles, variant, bin_ = plan(i, cfg, bins)
        i += 1
        if placeable and needles >= most:
            skips[f"too_few_paragraphs_for_{needles}_needles"] += 1
            continue
        sample = generate_sample(pool, needles, variant, bin_, rng, cfg, n_tokens, bins)
        prompt = np.asarray(tok.encode(render_chat(sample["prompt"]), add_special_tokens=False).ids, np.int32)
        answer = np.asarray(tok.encode(sample["answer"], add_special_tokens=False).ids, np.int32)
        if len(prompt) + len(answer) > target:
            skips["too_long"] += 1
            misses += 1
            continue
        misses = 0
        meta = {
            k: sample[k]
            for k in ("variant", "n_needles", "desired_msg_index", "total_messages", "n_chars", "bin")
        }
        meta |= {
            "random_string_to_prepend": sample["random_string_to_prepend"],
            "answer_span": [len(prompt), len(prompt) + len(answer)],
        }
        yield [prompt, answer], meta, sample
