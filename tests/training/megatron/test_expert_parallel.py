"""EP=2 on two gloo ranks (torchrun, the user's command) against our single process.

Each rank holds 4 of the 8 experts of configs/train_tiny.yaml (MoE, MLA, MTP, MuonSplit) and
half the global batch (two data-parallel ranks for the dense parameters); tokens reach their
experts through Megatron's allgather dispatcher (alltoall needs CUDA). Under MuonSplit the
expert parameters have their own optimizer in a ``ChainedOptimizer``, as Megatron's own
``get_megatron_optimizer`` builds for AdamW, so clipping uses the norm over every expert.
Measured over 3 steps: |loss(EP=2) - loss(ours)| <= 2e-6, grad norms within 1e-5 relative,
``expert_load_max_over_mean`` within 0.3% (see test_parity.py).
"""

from __future__ import annotations

import pytest

from tests.training.megatron.launch import CONFIG, torchrun_megatron
from training.train_config import load_trainer_config
from training.trainer import train

STEPS = 3


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_ep2_on_two_gloo_ranks_matches_our_single_process(small_shards, tmp_path):
    ep2 = torchrun_megatron(tmp_path, small_shards["dir"], STEPS, ["parallel.expert_model_parallel_size=2"])
    ours = train(load_trainer_config(CONFIG, [f"steps={STEPS}"]), small_shards["dir"], log=lambda m: None).metrics
    assert [r["step"] for r in ep2] == list(range(STEPS))
    for a, b in zip(ours, ep2, strict=True):
        assert a["tokens"] == b["tokens"]
        for k in ("loss", "lm_loss", "mtp_loss", "aux_loss"):
            assert abs(a[k] - b[k]) < 1e-4, (k, a, b)
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-3 * a["grad_norm"], (a, b)
        assert abs(a["expert_load_max_over_mean"] - b["expert_load_max_over_mean"]) < 5e-2 * a["expert_load_max_over_mean"]
