"""Our loader's batches as Megatron's inputs: loss masks and attention masks are ours.

The mask tests are pure tensor checks against the rule our model applies
(training/model/glm.py ``_shifted_ce``); the forward test runs Megatron's GPTModel on rows cut
into several documents and compares with our model on the same weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from core.errors import ConfigError
from training.loader import Batch, ShardLoader
from training.megatron.batches import to_microbatch
from training.megatron.train import check_supported, load_megatron_config
from training.model.doc_mask import segment_ids

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "train_tiny.yaml"


def batch(doc_lens: list[list[int]], S: int, loss_mask: torch.Tensor | None = None) -> Batch:
    B = len(doc_lens)
    flat = torch.tensor([n for row in doc_lens for n in row], dtype=torch.int32)
    tokens = torch.arange(B * S, dtype=torch.int32).view(B, S) % 97
    return Batch(tokens, flat, [len(r) for r in doc_lens], ["t"] * B, np.arange(B), loss_mask)


def our_rule(seg: torch.Tensor, shift: int, trained: torch.Tensor | None = None) -> torch.Tensor:
    """1 where our model trains position t on target t+shift."""
    B, S = seg.shape
    out = torch.zeros(B, S, dtype=torch.bool)
    out[:, : S - shift] = seg[:, shift:] == seg[:, : S - shift]
    if trained is not None:
        out[:, : S - shift] &= trained[:, shift:].bool()
    return out


@pytest.mark.parametrize("sft", [False, True])
def test_masks_follow_our_document_rule(sft):
    S, lens = 10, [[3, 5, 2], [10], [1, 9]]
    trained = (torch.arange(S) % 3 != 0).int().expand(3, S).clone() if sft else None
    mb = to_microbatch(batch(lens, S, trained))
    seg = segment_ids([torch.tensor(r) for r in lens], S)
    assert torch.equal(mb.loss_mask.bool(), our_rule(seg, 1, trained))
    assert torch.equal(mb.labels[:, :-1], mb.tokens[:, 1:])
    # GPTModel rolls the MTP mask left once for depth 1: that must be our depth-1 (shift 2) rule
    assert torch.equal(torch.roll(mb.mtp_loss_mask, -1, dims=1)[:, :-1].bool(), our_rule(seg, 2, trained)[:, :-1])
    allowed = (seg[:, :, None] == seg[:, None, :]) & torch.ones(S, S, dtype=torch.bool).tril()
    assert torch.equal(~mb.attention_mask[:, 0], allowed)
    assert to_microbatch(batch([[S]] * 2, S)).attention_mask is None  # one document per row: plain causal


def test_unsupported_modes_are_refused_with_the_reason():
    for sets, field in [
        (["parallel.pipeline_model_parallel_size=2", "parallel.virtual_pipeline_model_parallel_size=2"],
         "micro_batches"),
        (["megatron.experts=grouped_gemm", "parallel.tensor_model_parallel_size=2"], "experts"),
        (["model.dsa_indexer_n_heads=2", "model.dsa_indexer_head_dim=16", "model.dsa_indexer_topk=4"], "dsa"),
        (["optimizer.qk_clip_tau=100"], "qk_clip_tau"),
    ]:
        with pytest.raises(ConfigError, match=field):
            check_supported(load_megatron_config(CONFIG, sets))


def test_document_masks_make_megatron_forward_equal_ours(small_shards):
    """Rows cut into three documents: Megatron's GPTModel (document-masked attention, our loss
    masks) gives our LM and MTP losses; without the attention mask it does not."""
    from megatron.core.transformer.multi_token_prediction import MTPLossLoggingHelper

    from training.megatron.build import build
    from training.megatron.cpu import cpu_stand_ins
    from training.megatron.world import World
    from training.train_config import build_model, resolve_stages

    cfg = load_megatron_config(CONFIG, ["loader.batch_size=2"])
    stages = resolve_stages(cfg, small_shards["dir"])
    b = next(iter(ShardLoader(small_shards["dir"], cfg.loader)))
    S = b.tokens.shape[1]
    cut = [40, 50, S - 90]
    b = Batch(b.tokens, torch.tensor(cut * 2, dtype=torch.int32), [3, 3], b.sources, b.indices)
    torch.set_num_threads(1)
    with cpu_stand_ins():
        world = World(cfg)
        try:
            meg = build(cfg, stages, world).chunks[0]
            ours = build_model(cfg, stages)
            got = {}
            with torch.no_grad():
                expected = ours.loss(b.tokens, b.doc_lens)
                for masks in (True, False):
                    mb = to_microbatch(b, "cpu", masks)
                    per = meg(mb.tokens, mb.position_ids, mb.attention_mask, labels=mb.labels,
                              loss_mask=mb.mtp_loss_mask)  # fmt: skip
                    mtp = MTPLossLoggingHelper.tracker["values"].clone()
                    MTPLossLoggingHelper.clean_loss_in_tracker()
                    got[masks] = (float((per * mb.loss_mask).sum() / mb.loss_mask.sum()), float(mtp.mean()))
        finally:
            world.close()
    assert abs(got[True][0] - float(expected["lm_loss"])) < 1e-5, (got, expected)
    assert abs(got[True][1] - float(expected["mtp_loss"])) < 1e-5, (got, expected)
    assert abs(got[False][0] - float(expected["lm_loss"])) > 1e-3  # the mask is what makes them equal
