import json

import numpy as np
import pyarrow as pa
import pytest

from core.errors import ShardError
from core.shards import (
    MANIFEST,
    SHARD_SCHEMA,
    ShardWriter,
    TokenizerInfo,
    open_shard,
    read_manifest,
    sha256_file,
    verify_shard,
)

TOK = TokenizerInfo(id="t-1", vocab_size=100, eos_id=0)


def write(tmp_path, n=10, per_shard=4, seq_len=6):
    rng = np.random.default_rng(0)
    seqs = []
    with ShardWriter(
        tmp_path, seq_len=seq_len, tokenizer=TOK, stage="s1", sequences_per_shard=per_shard, config={"k": 1}
    ) as w:
        for i in range(n):
            toks = rng.integers(0, 100, seq_len).astype(np.int32)
            lens = [2, seq_len - 2] if i % 2 else [seq_len]
            src = "a" if i < 7 else "b"
            w.add(toks, lens, src)
            seqs.append((toks, lens, src))
        w.add_docs("a", 3)
        w.add_docs("b", 1)
        w.add_dropped_tokens("b", 5)
    return seqs


def test_writer_manifest_and_contents(tmp_path):
    seqs = write(tmp_path)
    m = read_manifest(tmp_path)
    assert [s.file for s in m.shards] == ["shard-00000.arrow", "shard-00001.arrow", "shard-00002.arrow"]
    assert [s.sequences for s in m.shards] == [4, 4, 2]
    assert m.counts["a"].sequences == 7 and m.counts["b"].tokens == 18 and m.counts["b"].tokens_dropped == 5
    assert m.totals.tokens == 60 and m.totals.docs == 4
    assert m.tokenizer == TOK and m.stage == "s1" and m.seq_len == 6 and m.config == {"k": 1}
    rows = []
    for info in m.shards:
        assert sha256_file(tmp_path / info.file) == info.sha256
        t = open_shard(verify_shard(tmp_path, info))
        assert t.schema.equals(SHARD_SCHEMA)
        rows += t.to_pylist()
    for row, (toks, lens, src) in zip(rows, seqs, strict=True):
        assert row["tokens"] == toks.tolist() and row["doc_lens"] == lens and row["source"] == src
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_failed_write_leaves_no_manifest(tmp_path):
    write(tmp_path)
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path, seq_len=6, tokenizer=TOK, stage="s") as w:
            w.add(np.zeros(6, np.int32), [6], "a")
            raise RuntimeError("crash mid-write")
    assert not (tmp_path / MANIFEST).exists()
    assert not list(tmp_path.glob("shard-*.arrow"))  # stale shards of the old run are gone too
    with pytest.raises(ShardError, match="did not finish"):
        read_manifest(tmp_path)


def test_add_validates_shapes(tmp_path):
    with ShardWriter(tmp_path, seq_len=4, tokenizer=TOK, stage="s") as w:
        with pytest.raises(ValueError, match="expected"):
            w.add(np.zeros(5, np.int32), [5], "a")
        with pytest.raises(ValueError, match="sum to seq_len"):
            w.add(np.zeros(4, np.int32), [1, 2], "a")


def test_verify_detects_tampering(tmp_path):
    write(tmp_path)
    m = read_manifest(tmp_path)
    p = tmp_path / m.shards[1].file
    data = bytearray(p.read_bytes())
    data[-40] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(ShardError, match="sha256"):
        verify_shard(tmp_path, m.shards[1])
    p.write_bytes(bytes(data[:-8]))
    with pytest.raises(ShardError, match="size"):
        verify_shard(tmp_path, m.shards[1])
    p.unlink()
    with pytest.raises(ShardError, match="missing"):
        verify_shard(tmp_path, m.shards[1])


def test_bad_manifest_and_bad_shard(tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ShardError, match="not valid JSON"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"stage": "x"}))
    with pytest.raises(ShardError, match="missing required key 'seq_len'"):
        read_manifest(tmp_path)
    bad = tmp_path / "x.arrow"
    bad.write_bytes(b"garbage" * 10)
    with pytest.raises(ShardError, match="not a readable Arrow IPC file"):
        open_shard(bad)
    other = pa.table({"x": [1]})
    with pa.OSFile(str(bad), "wb") as sink, pa.ipc.new_file(sink, other.schema) as w:
        w.write_table(other)
    with pytest.raises(ShardError, match="does not match the shard schema"):
        open_shard(bad)
