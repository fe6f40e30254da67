import duckdb
import numpy as np
import pytest

from core.shards import open_shard, read_manifest
from pipelines.bpe_tokenizer import TokenizerConfig, load_or_train
from pipelines.pack import PackConfig, SequencePacker, pack_documents


def test_packer_splits_documents_across_sequences():
    p = SequencePacker(4)
    out = []
    for doc in ([1, 2, 3], [4, 5], [6, 7, 8, 9, 10, 11, 12]):
        out += list(p.add(np.array(doc, np.int32)))
    assert [s.tolist() for s, _ in out] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    assert [lens for _, lens in out] == [[3, 1], [1, 3], [4]]
    assert p.leftover == 0
    assert list(p.add(np.array([13], np.int32))) == [] and p.leftover == 1


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
