import numpy as np
import pytest

from core.errors import ShardError
from core.shards import open_shard, read_manifest
from training.loader import LoaderConfig, ShardLoader


def all_rows(shard_dir):
    m = read_manifest(shard_dir)
    rows = []
    for s in m.shards:
        rows += open_shard(shard_dir / s.file).to_pylist()
    return rows


def take(it, n):
    return [next(it) for _ in range(n)]


def test_batches_are_the_shard_rows(small_shards):
    rows = all_rows(small_shards["dir"])
    loader = ShardLoader(small_shards["dir"], LoaderConfig(batch_size=4, seed=3))
    assert loader.num_sequences == len(rows) and len(loader) == len(rows) // 4
    for batch in take(iter(loader), 5):
        assert batch.tokens.shape == (4, 128) and str(batch.tokens.dtype) == "torch.int32"
        for i, g in enumerate(batch.indices):
            assert batch.tokens[i].tolist() == rows[g]["tokens"]
            assert batch.doc_lens[i].tolist() == rows[g]["doc_lens"]
            assert batch.sources[i] == rows[g]["source"]
            assert int(batch.doc_lens[i].sum()) == 128


def test_token_views_are_zero_copy_into_the_mapped_file(small_shards):
    loader = ShardLoader(small_shards["dir"], LoaderConfig(batch_size=2))
    chunk = loader._chunks[0]
    assert not chunk.tokens.flags.owndata and not chunk.tokens.flags.writeable
    mapping = loader._maps[0]
    mapping.seek(0)
    whole = mapping.read_buffer(mapping.size())  # zero-copy: the mapped file's own address range
    start = chunk.tokens.ctypes.data
    assert whole.address <= start and start + chunk.tokens.nbytes <= whole.address + whole.size


def test_epoch_is_a_permutation_and_ranks_partition_it(small_shards):
    cfg = LoaderConfig(batch_size=4, seed=1, epochs=1)
    full = np.concatenate([b.indices for b in ShardLoader(small_shards["dir"], cfg)])
    n = ShardLoader(small_shards["dir"], cfg).num_sequences
    assert len(full) == (n // 4) * 4 and len(set(full.tolist())) == len(full)
    r0 = np.concatenate([b.indices for b in ShardLoader(small_shards["dir"], cfg, rank=0, world_size=2)])
    r1 = np.concatenate([b.indices for b in ShardLoader(small_shards["dir"], cfg, rank=1, world_size=2)])
    assert not set(r0.tolist()) & set(r1.tolist())
    other_seed = np.concatenate(
        [b.indices for b in ShardLoader(small_shards["dir"], cfg.model_copy(update={"seed": 2}))]
    )
    assert not np.array_equal(full, other_seed)


def test_resume_sees_exactly_the_uninterrupted_batches(small_shards):
    cfg = LoaderConfig(batch_size=8, seed=7)
    straight = ShardLoader(small_shards["dir"], cfg)
    per_epoch = len(straight)
    n = per_epoch + 5  # crosses an epoch boundary
    expected = [b.indices.tolist() for b in take(iter(straight), n)]

    first = ShardLoader(small_shards["dir"], cfg)
    got = [b.indices.tolist() for b in take(iter(first), per_epoch - 2)]
    state = first.state_dict()
    resumed = ShardLoader(small_shards["dir"], cfg)
    resumed.load_state_dict(state)
    got += [b.indices.tolist() for b in take(iter(resumed), n - len(got))]
    assert got == expected
    assert expected[0] != expected[per_epoch]  # a new epoch reshuffles

    with pytest.raises(ValueError, match="seed"):
        ShardLoader(small_shards["dir"], cfg.model_copy(update={"seed": 8})).load_state_dict(state)


def test_ranks_split_each_global_batch_and_resume_on_another_world_size(small_shards):
    """What torchrun ranks read: rank r of N takes its share of every global batch (together the
    one-process batch), and a state saved on 2 ranks resumes in one process at the same place."""
    d, glob = small_shards["dir"], 4
    single = ShardLoader(d, LoaderConfig(batch_size=glob, seed=3))
    n = len(single) + 3  # crosses an epoch boundary
    want = [sorted(b.indices.tolist()) for b in take(iter(single), n)]
    ranks = [ShardLoader(d, LoaderConfig(batch_size=glob // 2, seed=3), rank=r, world_size=2) for r in (0, 1)]
    its = [iter(loader) for loader in ranks]
    got = [sorted(next(its[0]).indices.tolist() + next(its[1]).indices.tolist()) for _ in range(5)]
    assert ranks[0].state_dict()["batch_in_epoch"] == ranks[1].state_dict()["batch_in_epoch"] == 5
    one = ShardLoader(d, LoaderConfig(batch_size=glob, seed=3))
    one.load_state_dict(ranks[1].state_dict())
    got += [sorted(b.indices.tolist()) for b in take(iter(one), n - 5)]
    assert got == want
    with pytest.raises(ValueError, match="global batch"):  # another global batch: other rows
        ShardLoader(d, LoaderConfig(batch_size=glob, seed=3), rank=0, world_size=2).load_state_dict(
            ranks[0].state_dict())


def test_corrupt_shard_is_refused(small_shards, tmp_path):
    import shutil

    d = tmp_path / "shards"
    shutil.copytree(small_shards["dir"], d)
    p = d / "shard-00001.arrow"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    with pytest.raises(ShardError, match="shard-00001.arrow: sha256 .* does not match the manifest"):
        ShardLoader(d)
    with pytest.raises(ShardError, match="not enough for one batch"):
        ShardLoader(small_shards["dir"], LoaderConfig(batch_size=10_000))
