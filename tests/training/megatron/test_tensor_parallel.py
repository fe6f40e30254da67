"""TP=2 on two gloo ranks (torchrun, the user's command) against one process, MuonSplit and AdamW.

Megatron-core 0.16.1 refuses MoE + TP in training without sequence parallelism, and the
local spec's norm refuses sequence parallelism without Apex (CUDA): on CPU the TP check runs
the dense variant of configs/train_tiny.yaml (``model.num_moe_experts: null``; MLA and MTP
stay on). Each rank holds half the heads; under MuonSplit it orthogonalises whole heads of the
MLA up-projections, other TP-sharded matrices are orthogonalised whole (all-gathered); AdamW is
Megatron's own optimizer. Measured over 3 steps: |loss(TP=2) - loss(one process, ours)| <= 1e-4;
asserted: 1e-3.
"""

from __future__ import annotations

import pytest
import torch

from tests.training.megatron.launch import CONFIG, torchrun_megatron
from training.train_config import load_trainer_config
from training.trainer import train

DENSE = ["model.num_moe_experts=null"]
STEPS = 3


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
@pytest.mark.parametrize("optimizer", ["muon_split", "adamw"])
def test_tp2_on_two_gloo_ranks_matches_our_single_process(small_shards, tmp_path, optimizer):
    sets = DENSE + [f"optimizer.name={optimizer}"]
    tp2 = torchrun_megatron(tmp_path, small_shards["dir"], STEPS, sets + ["parallel.tensor_model_parallel_size=2"])
    ours = train(load_trainer_config(CONFIG, sets + [f"steps={STEPS}"]), small_shards["dir"], log=lambda m: None).metrics
    assert [r["step"] for r in tp2] == list(range(STEPS))
    for a, b in zip(ours, tp2, strict=True):
        assert a["tokens"] == b["tokens"]  # both ranks read the same (whole) batch: one data-parallel rank
        assert abs(a["loss"] - b["loss"]) < 1e-3 and abs(a["lm_loss"] - b["lm_loss"]) < 1e-3, (a, b)


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_tp2_resumes_a_converted_checkpoint_and_its_checkpoint_converts_back(small_shards, tmp_path):
    """Ours -> Megatron (weights only, one rank) -> ``--resume`` under TP=2 (Megatron reshards it);
    the TP=2 run's step-2 checkpoint -> ours (TP slices gathered) gives the loss the run logged at
    step 2; and the TP=2 run's step-0 loss is our model's on the first batch."""
    from training.hf.convert import load_model
    from training.loader import ShardLoader
    from training.megatron.convert import to_megatron, to_ours

    ours = train(load_trainer_config(CONFIG, DENSE + ["steps=1", "seed=1", f"checkpoint.dir={tmp_path / 'ours'}"]),
                 small_shards["dir"], log=lambda m: None)  # fmt: skip
    to_megatron(ours.checkpoint, tmp_path / "meg", log=lambda m: None)
    sets = DENSE + ["parallel.tensor_model_parallel_size=2", "checkpoint.every=2"]
    tp2 = torchrun_megatron(tmp_path, small_shards["dir"], 3, sets, "--checkpoint-dir", str(tmp_path / "meg"), "--resume")
    assert [r["step"] for r in tp2] == [0, 1, 2]

    cfg = load_trainer_config(CONFIG, DENSE)
    it = iter(ShardLoader(small_shards["dir"], cfg.loader))
    b = [next(it) for _ in range(3)]
    with torch.no_grad():
        start = ours.model.loss(b[0].tokens, b[0].doc_lens)
    assert abs(float(start["lm_loss"]) - tp2[0]["lm_loss"]) < 1e-5, (start, tp2[0])

    to_ours(tmp_path / "meg" / "step-00000002", tmp_path / "back", log=lambda m: None)
    back, _ = load_model(tmp_path / "back")
    with torch.no_grad():
        out = back.loss(b[2].tokens, b[2].doc_lens)
    for k in ("lm_loss", "mtp_loss"):
        assert abs(float(out[k]) - tp2[2][k]) < 1e-5, (k, out, tp2[2])
