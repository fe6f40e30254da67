"""PP=2 on two gloo ranks (torchrun, the user's command) against our single process, with the
stages planned by ``training.tools.pipeline_layout`` (``megatron.pipeline_layout: plan``).

For configs/train_tiny.yaml at 128 tokens the planner gives ``Et*3|tmL``: the first stage holds
the embedding and three decoder layers, the second one layer, the MTP block and the loss (the
output layer and MTP cost it the other layers). Megatron's 1F1B schedule sends activations
between the stages over gloo; the last stage's embedding copy (MTP reads token embeddings)
starts equal to the first stage's and their gradients are summed by Megatron's
``finalize_model_grads``. The run's step-2 dist checkpoint, two stages' files, converts to one
model of ours that gives the loss the run logged at step 2, and resumes on two ranks bit-exactly
(the step-2 row again, every figure equal). Measured over 3 steps: |loss(PP=2) - loss(ours)| <= 1e-6.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from tests.training.megatron.launch import CONFIG, torchrun_megatron
from training.train_config import load_trainer_config
from training.trainer import train

STEPS = 3


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_pp2_with_planned_layout_matches_ours_its_checkpoint_converts_and_resumes(small_shards, tmp_path):
    from training.checkpoint import load_model
    from training.loader import ShardLoader
    from training.megatron.convert import to_ours

    sets = ["parallel.pipeline_model_parallel_size=2", "megatron.pipeline_layout=plan", "checkpoint.every=2"]
    pp2 = torchrun_megatron(tmp_path, small_shards["dir"], STEPS, sets, "--checkpoint-dir", str(tmp_path / "meg"))
    cfg = load_trainer_config(CONFIG, [f"steps={STEPS}"])
    ours = train(cfg, small_shards["dir"], log=lambda m: None).metrics
    assert [r["step"] for r in pp2] == list(range(STEPS))
    for a, b in zip(ours, pp2, strict=True):
        assert a["tokens"] == b["tokens"]
        for k in ("loss", "lm_loss", "mtp_loss"):
            assert abs(a[k] - b[k]) < 1e-4, (k, a, b)
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-3 * a["grad_norm"], (a, b)

    to_ours(tmp_path / "meg" / "step-00000002", tmp_path / "ours", log=lambda m: None)
    model, _ = load_model(tmp_path / "ours")
    it = iter(ShardLoader(small_shards["dir"], cfg.loader))
    batch = [next(it) for _ in range(3)][2]
    with torch.no_grad():
        out = model.loss(batch.tokens, batch.doc_lens)
    for k in ("lm_loss", "mtp_loss"):
        assert abs(float(out[k]) - pp2[2][k]) < 1e-5, (k, out, pp2[2])

    shutil.rmtree(tmp_path / "meg" / "step-00000003")  # resume from step 2: that row again, bit for bit
    again = torchrun_megatron(tmp_path, small_shards["dir"], STEPS, sets, "--checkpoint-dir", str(tmp_path / "meg"),
                              "--resume")  # fmt: skip
    keep = ("loss", "lm_loss", "mtp_loss", "grad_norm", "lr", "tokens", "expert_load_max_over_mean")
    assert [r["step"] for r in again] == [2] and {k: again[0][k] for k in keep} == {k: pp2[2][k] for k in keep}
