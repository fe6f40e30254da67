"""Long-sequence packing: tokens/s and peak RSS for 200K-token sequences.

Both sides pack the same real token stream (the sample novels, tokenized once with the demo
tokenizer if present, else a byte-level BPE trained on them) into 200,000-token sequences
and write them with the same ShardWriter. Baseline: ``ListPacker`` below, the list-based packer
the pretraining path used before it moved onto the one packer (a list of pending pieces,
concatenated per sequence). Ours: ``pipelines.pack.StreamPacker`` (one preallocated int32
buffer). Each runs in
a fresh process so its peak RSS (``ru_maxrss``) is its own.
Linux keeps ``ru_maxrss`` across fork+exec, so the figure includes the parent's start-up
(reported as "over start"). Writes out/bench/longctx_packing.json. Run: `python benchmarks/longctx_packing.py [--seqs 48 --seq-len 200000]`.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from _report import Result, write

from core.shards import ShardWriter, TokenizerInfo

ROOT = Path(__file__).resolve().parents[1]


def corpus_tokens(out: Path) -> None:
    """The novels as token arrays (``out/tokens.npz``, one array per novel); runs in its own
    process so the parent's peak RSS, which children inherit, stays small."""
    from tokenizers import Tokenizer

    from core.tokenizer import TokenizerConfig, train_bpe
    from samples.corpus import SampleConfig, obtain_sample

    books = [
        json.loads(x)["text"]
        for x in obtain_sample(SampleConfig(), log=lambda m: None)
        .books_jsonl.read_text()
        .splitlines()
    ]
    demo = ROOT / "out/demo/tokenizer/tokenizer.json"
    tok = (
        Tokenizer.from_file(str(demo))
        if demo.is_file()
        else train_bpe(books, TokenizerConfig(vocab_size=8192))
    )
    arrays = {
        f"b{i}": np.asarray(e.ids, np.int32)
        for i, e in enumerate(tok.encode_batch_fast(books, add_special_tokens=False))
    }
    np.savez(out / "tokens.npz", **arrays)


def docs(path: Path, total: int):
    """Documents cycled until ``total`` tokens, handed out in 64K-token pieces like the job does."""
    arrays = list(np.load(path).values())
    n = 0
    while n < total:
        for a in arrays:
            yield [a[i : i + 65536] for i in range(0, len(a), 65536)]
            n += len(a) + 1
            if n >= total:
                return


class ListPacker:
    """Baseline: pending token arrays in a list, concatenated into each emitted sequence."""

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self._chunks: list[np.ndarray] = []
        self._pending = 0

    def add(self, tokens: np.ndarray):
        if len(tokens) == 0:
            return
        self._chunks.append(tokens)
        self._pending += len(tokens)
        while self._pending >= self.seq_len:
            yield self._emit()

    def _emit(self):
        need, parts, lens = self.seq_len, [], []
        while need:
            head = self._chunks[0]
            take = min(need, len(head))
            parts.append(head[:take])
            lens.append(take)
            if take == len(head):
                self._chunks.pop(0)
            else:
                self._chunks[0] = head[take:]
            need -= take
        self._pending -= self.seq_len
        return np.concatenate(parts).astype(np.int32, copy=False), lens


def run(which: str, path: Path, seqs: int, seq_len: int, out: Path, q) -> None:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    info = TokenizerInfo(id="bench", vocab_size=65536, eos_id=0)
    eos = np.zeros(1, np.int32)
    t0 = time.perf_counter()
    with ShardWriter(out, seq_len=seq_len, tokenizer=info, stage="bench", sequences_per_shard=8) as w:
        if which == "baseline":
            packer = ListPacker(seq_len)
            done = 0
            for pieces in docs(path, seqs * seq_len):
                for seq, lens in packer.add(np.concatenate([*pieces, eos])):
                    if done < seqs:
                        w.add(seq, lens, "books")
                        done += 1
        else:
            from pipelines.pack import StageWriter, StreamPacker

            packer = StreamPacker(StageWriter(w, io.StringIO()), "books", seq_len, 0)
            for pieces in docs(path, seqs * seq_len):
                if not packer.add_stream(pieces, "natural", {}, budget=seqs):
                    break
    dt = time.perf_counter() - t0
    q.put(
        (which, seqs * seq_len / dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, base / 1024)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seqs", type=int, default=48)
    ap.add_argument("--seq-len", type=int, default=200_000)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        p = ctx.Process(target=corpus_tokens, args=(Path(tmp),))
        p.start()
        p.join()
        path = Path(tmp) / "tokens.npz"
        results = {}
        for which in ("baseline", "streampacker"):
            q = ctx.Queue()
            p = ctx.Process(target=run, args=(which, path, args.seqs, args.seq_len, Path(tmp) / which, q))
            p.start()
            results[which] = q.get()
            p.join()
    print(f"{args.seqs} sequences x {args.seq_len:,} tokens, written as Arrow shards (8 sequences per shard)")
    for which, tps, peak, base in results.values():
        print(
            f"  {which:13s} {tps / 1e6:7.1f} M tokens/s   peak RSS {peak:6.0f} MB ({peak - base:+.0f} MB over start)"
        )
    b, o = results["baseline"], results["streampacker"]
    print(f"ratio streampacker/baseline: {o[1] / b[1]:.2f} tokens/s, {o[2] / b[2]:.2f} peak RSS")
    write(
        __file__,
        Result("long-sequence packing", o[1], b[1], "tokens/s", ours_label="pipelines.pack.StreamPacker",
               baseline_label="ListPacker (the former pretraining packer)"),
        {"seqs": args.seqs, "seq_len": args.seq_len, "text": "sample novels"},
        [Result("long-sequence packing peak RSS", o[2], b[2], "MB", higher_is_better=False,
                ours_label="StreamPacker", baseline_label="ListPacker")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
