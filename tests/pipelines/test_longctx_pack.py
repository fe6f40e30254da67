"""The streaming packer against the real shard writer and loader."""

import io
import json

import numpy as np

from core.shards import ShardWriter, TokenizerInfo
from pipelines.longctx_pack import StageWriter, StreamPacker, count_tokens, encode_pieces, text_pieces
from training.loader import LoaderConfig, ShardLoader

EOS = 0
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


def test_long_text_is_encoded_in_bounded_pieces(small_shards):
    tok = small_shards["tokenizer"]
    text = ("A line of a long book that goes on.\n" * 5000)[:150_000]
    pieces = list(text_pieces(text, 10_000))
    assert "".join(pieces) == text and max(len(p) for p in pieces) <= 10_000
    assert all(p.endswith("\n") for p in pieces[:-1])
    arrays = list(encode_pieces(tok, text, 10_000))
    assert all(a.dtype == np.int32 for a in arrays) and len(arrays) == len(pieces)
    assert count_tokens(tok, [text, "short"], 10_000) == [
        sum(len(a) for a in arrays),
        len(tok.encode("short").ids),
    ]
    assert tok.decode(np.concatenate(arrays).tolist()) == text
