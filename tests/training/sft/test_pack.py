"""SFT packing: whole samples, padding as its own masked segment, the loss_mask column read
back by the loader, and the model's loss taken only on trained tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.shards import TokenizerInfo, open_shard
from tests.training.glm_tiny import tiny_model
from training.loader import LoaderConfig, ShardLoader
from training.model.glm import GLMModel
from training.sft.pack import SamplePacker, write_sft_shards

INFO = TokenizerInfo(id="t", vocab_size=50, eos_id=1)


def test_packer_never_splits_a_sample():
    p = SamplePacker(8, pad_id=0)
    out = list(p.add([5, 6, 7], [0, 1, 1])) + list(p.add([8, 9, 10, 11], [0, 0, 1, 1])) + list(p.add([12, 13], [0, 1]))
    out += list(p.flush())
    (t1, l1, m1), (t2, l2, m2) = out
    assert t1.tolist() == [5, 6, 7, 8, 9, 10, 11, 0] and l1 == [3, 4, 1] and m1.tolist() == [0, 1, 1, 0, 0, 1, 1, 0]
    assert t2.tolist() == [12, 13, 0, 0, 0, 0, 0, 0] and l2 == [2, 6] and m2.tolist() == [0, 1] + [0] * 6
    with pytest.raises(ValueError):
        list(p.add(list(range(9)), [1] * 9))


def test_shards_carry_the_mask_and_the_loader_returns_it(tmp_path):
    samples = [([2, 3, 4, 5], [0, 0, 1, 1], "chat"), ([6, 7, 8], [0, 1, 1], "reasoning"),
               (list(range(2, 12)), [1] * 10, "chat"), ([9, 9], [0, 0], "chat")] * 3  # fmt: skip
    manifest, rejects = write_sft_shards(samples, tmp_path, INFO, seq_len=8, pad_id=1)
    assert rejects == {"longer_than_seq_len": 3, "nothing_to_train": 3}
    assert manifest.counts["chat"].docs == 3 and manifest.counts["reasoning"].docs == 3
    rows = [r for s in manifest.shards for r in open_shard(tmp_path / s.file).to_pylist()]
    for r in rows:
        assert len(r["loss_mask"]) == len(r["tokens"]) == 8 and sum(r["doc_lens"]) == 8
    loader = ShardLoader(tmp_path, LoaderConfig(batch_size=2, shuffle=False))
    batch = next(iter(loader))
    assert batch.loss_mask.shape == batch.tokens.shape
    want = [r["loss_mask"] for r in rows[:2]]
    assert batch.loss_mask.tolist() == want


def test_masked_loss_is_the_token_mean_over_trained_targets():
    torch.manual_seed(0)
    model = GLMModel(tiny_model(vocab_size=50, mtp_num_layers=None))
    tokens = torch.randint(2, 50, (2, 8))
    doc_lens = [torch.tensor([5, 3], dtype=torch.int32), torch.tensor([8], dtype=torch.int32)]
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0], [0, 1, 0, 0, 0, 0, 1, 1]], dtype=torch.int8)
    got = model.loss(tokens, doc_lens, loss_mask=mask)["lm_loss"]
    logits = model(tokens, doc_lens)
    # target t+1 counts when it is trained and in the same document as position t
    same_doc = np.ones((2, 7), bool)
    same_doc[0, 4] = False  # position 4 -> 5 crosses row 0's document boundary: trained but never a target
    terms = [
        F.cross_entropy(logits[b, t], tokens[b, t + 1])
        for b in range(2) for t in range(7) if mask[b, t + 1] and same_doc[b, t]
    ]  # fmt: skip
    assert len(terms) == 7  # row 0: targets 2, 3, 4, 6 (5 starts a document); row 1: 1, 6, 7
    torch.testing.assert_close(got, torch.stack(terms).mean())
    unmasked = model.loss(tokens, doc_lens)["lm_loss"]
    assert not torch.isclose(got, unmasked)
