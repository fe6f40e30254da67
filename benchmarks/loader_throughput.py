"""Shard loader read throughput vs a plain numpy copy of the same bytes (goal: ratio >= 0.5).

Both sides deliver the same shuffled batches of token rows: the baseline gathers them with
numpy fancy indexing from an in-memory array; the loader gathers them from memory-mapped
Arrow shards and also builds doc_lens and source lists. Writes out/bench/loader_throughput.json.
Run: `python benchmarks/loader_throughput.py`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _report import Result, write

from core.shards import ShardWriter, TokenizerInfo
from training.loader import LoaderConfig, ShardLoader


def build_shards(out: Path, n_seqs: int, seq_len: int) -> None:
    rng = np.random.default_rng(0)
    with ShardWriter(
        out,
        seq_len=seq_len,
        tokenizer=TokenizerInfo(id="bench", vocab_size=65536, eos_id=0),
        stage="bench",
        sequences_per_shard=4096,
    ) as w:
        for i in range(n_seqs):
            cut = int(rng.integers(1, seq_len))
            w.add(
                rng.integers(0, 65536, seq_len, dtype=np.int32), [cut, seq_len - cut], "a" if i % 3 else "b"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shards", type=Path, help="existing shard dir (default: build synthetic shards)")
    ap.add_argument("--seqs", type=int, default=16384)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        shard_dir = args.shards
        if shard_dir is None:
            shard_dir = Path(tmp) / "shards"
            build_shards(shard_dir, args.seqs, args.seq_len)
        loader = ShardLoader(
            shard_dir, LoaderConfig(batch_size=args.batch_size, seed=0, epochs=1, verify=False)
        )
        order = loader._epoch_order(0)
        n_batches = len(loader)
        bs, L = args.batch_size, loader.seq_len
        nbytes = n_batches * bs * L * 4

        # baseline: the same rows, gathered from a plain in-memory numpy array
        plain = np.concatenate([c.tokens for c in loader._chunks]).copy()
        t0 = time.perf_counter()
        for b in range(n_batches):
            out = plain[order[b * bs : (b + 1) * bs]]
        t_numpy = time.perf_counter() - t0
        del out

        def epoch() -> float:
            t0 = time.perf_counter()
            seen = 0
            for batch in loader:
                seen += batch.tokens.numel()
            assert seen * 4 == nbytes
            return time.perf_counter() - t0

        # first epoch: every page of the mapping is touched for the first time (page faults);
        # later epochs read already-mapped pages, like the baseline's resident array
        t_cold = epoch()
        loader = ShardLoader(
            shard_dir, LoaderConfig(batch_size=args.batch_size, seed=0, epochs=1, verify=False)
        )
        t_loader = epoch()

    gbps = lambda t: nbytes / t / 1e9  # noqa: E731
    print(f"{n_batches} batches of {bs}x{L} int32 tokens ({nbytes / 1e6:.0f} MB)")
    print(f"  numpy gather (baseline): {gbps(t_numpy):6.2f} GB/s")
    print(f"  ShardLoader, first pass (page faults): {gbps(t_cold):6.2f} GB/s  ratio {t_numpy / t_cold:.2f}")
    print(
        f"  ShardLoader, mapped pages:             {gbps(t_loader):6.2f} GB/s  ratio {t_numpy / t_loader:.2f}"
    )
    print(f"ratio loader/numpy: {t_numpy / t_loader:.2f}  (goal >= 0.5)")
    write(
        __file__,
        Result("shard loader", gbps(t_loader), gbps(t_numpy), "GB/s", goal=0.5,
               ours_label="ShardLoader over memory-mapped Arrow shards (mapped pages)",
               baseline_label="numpy fancy-index gather from an in-memory array"),
        {"batches": n_batches, "batch_size": bs, "seq_len": L, "mb": round(nbytes / 1e6, 1),
         "shards": str(args.shards) if args.shards else "synthetic"},
        [Result("shard loader first pass", gbps(t_cold), gbps(t_numpy), "GB/s",
                ours_label="ShardLoader, first pass (page faults)", baseline_label="numpy gather")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
