"""The one packer (stream and whole-sample modes) against the real shard writer and loader,
and pretraining packing of a documents dataset."""

import io
import json
import math

import duckdb
import numpy as np
import pytest

from core.shards import ShardWriter, TokenizerInfo, open_shard, read_manifest
from core.tokenizer import TokenizerConfig, load_or_train
from pipelines.pack import PackConfig, StageWriter, StreamPacker, pack_documents
from training.loader import LoaderConfig, ShardLoader

EOS = 0


class _Sequences:
    """The ShardWriter side of a StageWriter, keeping what it is handed."""

    def __init__(self):
        self.rows = []

    def add(self, tokens, lens, source):
        self.rows.append((tokens.tolist(), lens, source))


def test_stream_mode_splits_documents_across_sequences():
    seqs = _Sequences()
    p = StreamPacker(StageWriter(seqs), "s", 4, EOS)
    for doc in ([1, 2, 3], [4, 5], [6, 7, 8, 9, 10, 11, 12]):
        assert p.add_stream([np.array(doc, np.int32)], "document", {}, budget=math.inf)
    # each document is followed by its end-of-document token and continues in the next sequence
    assert [s for s, _, _ in seqs.rows] == [[1, 2, 3, EOS], [4, 5, EOS, 6], [7, 8, 9, 10]]
    assert [lens for _, lens, _ in seqs.rows] == [[4], [3, 1], [4]]
    assert p.fill == 3  # 11, 12, EOS: the partial tail pack_documents counts as dropped
    assert p.add_stream([np.array([], np.int32)], "document", {}, budget=math.inf)
    assert [s for s, _, _ in seqs.rows][-1] == [11, 12, EOS, EOS] and p.fill == 0


def test_shards_hold_exactly_the_documents_in_order(small_job, small_shards):
    """Decoding the packed sequences of each source gives back its documents, in id order,
    each followed by the end-of-document token — nothing lost but the counted tail."""
    m = small_shards["manifest"]
    tok, info = small_shards["tokenizer"], small_shards["info"]
    streams = {}
    for s in m.shards:
        for row in open_shard(small_shards["dir"] / s.file).to_pylist():
            assert sum(row["doc_lens"]) == m.seq_len == len(row["tokens"])
            streams.setdefault(row["source"], []).extend(row["tokens"])
    docs = (
        duckdb.connect()
        .execute(
            f"SELECT id, text, json_extract_string(metadata, '$.source') FROM "
            f"read_parquet('{small_job.documents_dir}/*.parquet') ORDER BY id"
        )
        .fetchall()
    )
    for source, stream in streams.items():
        expected = []
        for _, text, src in docs:
            if src == source:
                expected += tok.encode(text, add_special_tokens=False).ids + [info.eos_id]
        c = m.counts[source]
        assert len(expected) == c.tokens + c.tokens_dropped
        assert stream == expected[: c.tokens]
        assert c.docs == sum(1 for d in docs if d[2] == source)
    assert set(streams) == {"books", "python-docs"}
    assert m.totals.tokens == sum(s.tokens for s in m.shards) == m.totals.sequences * 128
    assert m.tokenizer.id.startswith("tokenizer-") and m.tokenizer.vocab_size == 2048


def test_same_documents_give_byte_identical_shards(small_job, small_shards, tmp_path):
    tok, info = small_shards["tokenizer"], small_shards["info"]
    m2 = pack_documents(
        small_job.documents_dir,
        tok,
        info,
        tmp_path,
        PackConfig(seq_len=128, sequences_per_shard=300),
        progress=False,
    )
    assert [s.sha256 for s in m2.shards] == [s.sha256 for s in small_shards["manifest"].shards]


def test_user_tokenizer_and_bad_tokenizer_path(small_shards, tmp_path):
    from core.errors import ConfigError

    path = small_shards["info"].path
    tok, info = load_or_train(TokenizerConfig(path=path), None, tmp_path)
    assert info.id == small_shards["info"].id and info.eos_id == small_shards["info"].eos_id
    with pytest.raises(ConfigError, match="does not exist"):
        load_or_train(TokenizerConfig(path=str(tmp_path / "nope.json")), None, tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a tokenizers JSON"):
        load_or_train(TokenizerConfig(path=str(tmp_path / "bad.json")), None, tmp_path)
    with pytest.raises(ConfigError, match="no end-of-document token"):
        load_or_train(TokenizerConfig(path=path, eos_token="<|nope|>"), None, tmp_path)


def test_manifest_records_stage_and_config(small_shards):
    m = read_manifest(small_shards["dir"])
    assert m.stage == "pretrain" and m.seq_len == 128 and m.format == "glm5-recipe.shards/v1"


INFO = TokenizerInfo(id="test", vocab_size=1000, eos_id=EOS)


def rows(shard_dir):
    loader = ShardLoader(shard_dir, LoaderConfig(batch_size=1, shuffle=False, epochs=1))
    return [(b.tokens[0].numpy(), b.doc_lens[0].tolist(), b.sources[0]) for b in loader]


def test_stream_and_whole_samples_with_masks_and_log(tmp_path):
    log = io.StringIO()
    with ShardWriter(tmp_path, seq_len=10, tokenizer=INFO, stage="t", sequences_per_shard=2) as w:
        sw = StageWriter(w, log)
        p = StreamPacker(sw, "natural", 10, EOS)
        # a 13-token document (+ EOS) spans two sequences; the second one continues it
        assert p.add_stream(
            [np.arange(1, 8, dtype=np.int32), np.arange(8, 14, dtype=np.int32)],
            "natural",
            {"doc": "a"},
            budget=5,
        )
        assert p.add_stream(iter([np.arange(100, 103, dtype=np.int32)]), "natural", {"doc": "b"}, budget=5)
        # budget reached in the middle of a document: it stops there, marked truncated
        assert not p.add_stream([np.arange(200, 230, dtype=np.int32)], "natural", {"doc": "c"}, budget=3)
        assert p.emitted == 3 and p.drop_partial() == 0
        q = StreamPacker(sw, "mrcr", 10, EOS)
        q.add_whole([np.arange(300, 304, dtype=np.int32)], "mrcr", {"doc": "d"})  # 5 tokens
        assert q.fits(4) and not q.fits(5)
        q.add_whole([np.arange(400, 405, dtype=np.int32)], "mrcr", {"doc": "e"})  # 6: pad, new seq
        q.pad()
    got = rows(tmp_path)
    assert [r[2] for r in got] == ["natural"] * 3 + ["mrcr"] * 2
    assert got[0][0].tolist() == list(range(1, 11)) and got[0][1] == [10]
    assert got[1][0].tolist() == [11, 12, 13, EOS, 100, 101, 102, EOS, 200, 201] and got[1][1] == [4, 4, 2]
    assert got[2][0].tolist() == list(range(202, 212)) and got[2][1] == [10]
    assert got[3][0].tolist() == [300, 301, 302, 303, EOS] + [EOS] * 5 and got[3][1] == [5, 5]
    assert got[4][0].tolist() == [400, 401, 402, 403, 404, EOS] + [EOS] * 4 and got[4][1] == [6, 4]
    assert sw.pad_tokens == 9
    log_rows = [json.loads(x) for x in log.getvalue().splitlines()]
    by_doc = {r.get("doc", r["kind"] + str(r["seq"])): r for r in log_rows}
    assert (by_doc["a"]["seq"], by_doc["a"]["offset"], by_doc["a"]["tokens"]) == (0, 0, 14)
    assert (by_doc["b"]["seq"], by_doc["b"]["offset"], by_doc["b"]["tokens"]) == (1, 4, 4)
    assert (by_doc["c"]["seq"], by_doc["c"]["tokens"], by_doc["c"]["truncated"]) == (1, 12, True)
    assert (by_doc["d"]["seq"], by_doc["e"]["seq"], by_doc["e"]["offset"]) == (3, 4, 0)
    assert sorted(r["kind"] for r in log_rows) == [
        "mrcr",
        "mrcr",
        "natural",
        "natural",
        "natural",
        "pad",
        "pad",
    ]


def test_data_running_out_drops_the_partial_sequence(tmp_path):
    log = io.StringIO()
    with ShardWriter(tmp_path, seq_len=8, tokenizer=INFO, stage="t") as w:
        sw = StageWriter(w, log)
        p = StreamPacker(sw, "regular", 8, EOS)
        p.add_stream([np.arange(1, 7, dtype=np.int32)], "regular", {"doc": "a"}, budget=10)  # 7 tokens
        p.add_stream([np.arange(10, 15, dtype=np.int32)], "regular", {"doc": "b"}, budget=10)  # 6 tokens
        assert p.emitted == 1 and p.drop_partial() == 5
    ((tokens, lens, _),) = rows(tmp_path)
    assert tokens.tolist() == [1, 2, 3, 4, 5, 6, EOS, 10] and lens == [7, 1]
    log_rows = [json.loads(x) for x in log.getvalue().splitlines()]
    assert [(r["doc"], r["tokens"], r.get("truncated", False)) for r in log_rows] == [
        ("a", 7, False),
        ("b", 1, True),
    ]
