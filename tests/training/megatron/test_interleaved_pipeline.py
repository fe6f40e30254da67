"""The interleaved (virtual) pipeline on two gloo ranks (torchrun, the user's command): PP=2 x VPP=2.

``parallel.virtual_pipeline_model_parallel_size=2`` with ``megatron.pipeline_layout: plan``: the
planner (``training.tools.pipeline_layout``) cuts embedding, layers, MTP and loss into four
chunks, chunk s on rank s % 2 as its virtual stage s // 2, the MTP block in the last rank's last
virtual stage (Megatron's rule for interleaving); each rank builds one GPTModel per virtual
stage and Megatron's interleaved 1F1B schedule runs them (it needs micro-batches >= PP: 2 here).
Against the single-process Megatron run with the same two micro-batches: within the PP=2 test's
tolerance. Then the run's step-2 dist checkpoint (two ranks x two chunks) resumes on two ranks
bit-exactly (the step-2 row again, every figure equal) and converts to one model of ours that
gives the loss the run logged at step 2. Measured: |loss(VPP) - loss(one process)| <= 1e-6.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from tests.training.megatron.launch import CONFIG, torchrun_megatron
from training.megatron.train import load_megatron_config, train

STEPS = 3
VPP = ["parallel.pipeline_model_parallel_size=2", "parallel.virtual_pipeline_model_parallel_size=2",
       "megatron.pipeline_layout=plan", "megatron.micro_batches=2", "checkpoint.every=2"]  # fmt: skip


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_vpp2_matches_one_process_resumes_bit_exactly_and_converts(small_shards, tmp_path):
    from training.checkpoint import load_model
    from training.loader import ShardLoader
    from training.megatron.convert import to_ours

    shards, ckpt = small_shards["dir"], tmp_path / "meg"
    vpp = torchrun_megatron(tmp_path, shards, STEPS, VPP, "--checkpoint-dir", str(ckpt))
    cfg = load_megatron_config(CONFIG, [f"steps={STEPS}", "megatron.micro_batches=2"])
    one = train(cfg, shards, log=lambda m: None).metrics
    assert [r["step"] for r in vpp] == list(range(STEPS))
    for a, b in zip(one, vpp, strict=True):
        print({k: (a[k], b[k]) for k in ("loss", "lm_loss", "mtp_loss", "grad_norm")})
        assert a["tokens"] == b["tokens"]
        for k in ("loss", "lm_loss", "mtp_loss"):
            assert abs(a[k] - b[k]) < 1e-4, (k, a, b)
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-3 * a["grad_norm"], (a, b)

    from training.megatron.checkpoint import common_state

    assert common_state(ckpt / "step-00000002")["pipeline_layout"] == "Et|t|t*2|mL"  # 4 chunks, MTP + loss last

    # resume from the step-2 checkpoint (the final step-3 one removed): step 2 again, bit for bit
    shutil.rmtree(ckpt / "step-00000003")
    again = torchrun_megatron(tmp_path, shards, STEPS, VPP, "--checkpoint-dir", str(ckpt), "--resume")
    assert [r["step"] for r in again] == [2]
    keep = ("loss", "lm_loss", "mtp_loss", "grad_norm", "lr", "tokens", "expert_load_max_over_mean")
    assert {k: again[0][k] for k in keep} == {k: vpp[2][k] for k in keep}

    to_ours(ckpt / "step-00000002", tmp_path / "ours", log=lambda m: None)
    model, _ = load_model(tmp_path / "ours")
    it = iter(ShardLoader(shards, cfg.loader))
    batch = [next(it) for _ in range(3)][2]
    with torch.no_grad():
        out = model.loss(batch.tokens, batch.doc_lens)
    for k in ("lm_loss", "mtp_loss"):
        assert abs(float(out[k]) - vpp[2][k]) < 1e-5, (k, out, vpp[2])
