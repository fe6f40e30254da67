"""Checkpoints flow both ways: a Megatron-trained dist checkpoint -> ours -> Hugging Face, and
ours -> Megatron, each compared on logits and losses.

One Megatron run of 3 steps (MuonSplit, MoE, MTP: configs/train_tiny.yaml) checkpoints at step 2
and at the end. Checked: the step-2 checkpoint converted to ours gives the loss the run logged at
step 2 (computed by Megatron on those weights); the final one converted to ours gives the logits
of Megatron's forward on the trained model; converted back to Megatron it holds the same tensors,
bit for bit; exported to Hugging Face it loads in transformers with our logits; and the Megatron
trainer started with ``--init-from`` (ours, or the Megatron checkpoint) logs our loss at step 0.
Measured: max |logit| difference ours vs Megatron 0 (same float ops on CPU: the tolerance is
1e-5), transformers vs ours below 1e-5 (asserted 1e-4).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from training.hf.convert import export_checkpoint, load_model
from training.loader import ShardLoader
from training.megatron.convert import one_rank, to_megatron, to_ours
from training.megatron.train import load_megatron_config
from training.megatron.train import train as megatron_train

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "train_tiny.yaml"
quiet = {"log": lambda m: None}


def batches(cfg, shards, n: int):
    it = iter(ShardLoader(shards, cfg.loader))
    return [next(it) for _ in range(n)]


@torch.no_grad()
def megatron_logits(state: dict[str, torch.Tensor], model_cfg, tokens: torch.Tensor) -> torch.Tensor:
    """Logits [B, S, V] of a fresh Megatron GPTModel holding ``state`` (a plain state dict copy,
    not the converter's path). GPTModel 0.16 with MTP runs only with labels, so they are given
    and the output layer's last call (after the MTP depths') is captured, cloned before Megatron's
    cross entropy works on it in place."""
    from training.megatron.convert import _megatron_model

    seen = []
    with one_rank():
        meg = _megatron_model(model_cfg).eval()
        meg.load_state_dict(state)
        hook = meg.output_layer.register_forward_hook(lambda m, a, out: seen.append(out[0].clone()))
        B, S = tokens.shape
        meg(tokens, torch.arange(S).expand(B, S), None, labels=torch.roll(tokens, -1, 1), loss_mask=torch.ones(B, S))
        hook.remove()
    return seen[-1].transpose(0, 1).float()


@pytest.fixture(scope="module")
def megatron_run(small_shards, tmp_path_factory):
    d = tmp_path_factory.mktemp("megatron_run")
    # eps 1e-6 on every norm: transformers' DeepSeek-V3 hard-codes it on the MLA latent norms
    sets = ["steps=3", f"checkpoint.dir={d / 'ckpt'}", "checkpoint.every=2", "model.layernorm_epsilon=1e-6"]
    cfg = load_megatron_config(CONFIG, sets)
    res = megatron_train(cfg, small_shards["dir"], **quiet)
    return {"cfg": cfg, "res": res, "ckpt": d / "ckpt", "dir": d}


def test_megatron_checkpoint_to_ours_to_hf_and_back(megatron_run, small_shards):
    from transformers import AutoModelForCausalLM

    cfg, res, d = megatron_run["cfg"], megatron_run["res"], megatron_run["dir"]
    trained = {k: v.detach().clone() for k, v in res.model.state_dict().items() if not k.endswith("_extra_state")}
    b = batches(cfg, small_shards["dir"], 3)

    # step 2: the converted weights give the loss Megatron logged on them
    to_ours(megatron_run["ckpt"] / "step-00000002", d / "ours2", **quiet)
    ours2, _ = load_model(d / "ours2")
    with torch.no_grad():
        out = ours2.loss(b[2].tokens, b[2].doc_lens)
    logged = res.metrics[2]
    assert abs(float(out["lm_loss"]) - logged["lm_loss"]) < 1e-5, (out, logged)
    assert abs(float(out["mtp_loss"]) - logged["mtp_loss"]) < 1e-5, (out, logged)

    # the final checkpoint: our logits are Megatron's forward on the trained model
    written = to_ours(megatron_run["ckpt"], d / "ours", **quiet)
    assert written.name == "step-00000000"
    ours, _ = load_model(d / "ours")
    tokens = b[0].tokens[:2].long()
    with torch.no_grad():
        mine = ours(tokens, [torch.tensor([tokens.shape[1]])] * 2)
    meg = megatron_logits(trained, ours.cfg, tokens)
    print(f"max abs logit difference ours vs Megatron: {(mine - meg).abs().max():.2e}")
    assert (mine - meg).abs().max() < 1e-5, (mine - meg).abs().max()

    # back to Megatron: the same tensors, bit for bit (loaded through dist_checkpointing)
    from training.megatron import checkpoint
    from training.megatron.convert import _megatron_model

    to_megatron(d / "ours", d / "meg_again", **quiet)
    with one_rank():
        again = _megatron_model(ours.cfg)
        state = checkpoint.load_weights(d / "meg_again" / "step-00000000", [again])
        back = {k: v for k, v in again.state_dict().items() if not k.endswith("_extra_state")}
    assert state["converted_from"]["format"] == "ours" and state["step"] == 0
    assert set(back) == set(trained) and all(torch.equal(back[k], trained[k]) for k in trained)

    # Hugging Face: transformers loads the export and gives our logits (no MTP there)
    export_checkpoint(d / "ours", d / "hf", **quiet)
    hf = AutoModelForCausalLM.from_pretrained(d / "hf").eval()
    with torch.no_grad():
        theirs = hf(tokens).logits.float()
    print(f"max abs logit difference transformers vs ours: {(theirs - mine).abs().max():.2e}")
    assert (theirs - mine).abs().max() < 1e-4, (theirs - mine).abs().max()


def test_convert_cli(megatron_run, tmp_path):
    from typer.testing import CliRunner

    from training.megatron.__main__ import app

    run = CliRunner().invoke(app, ["convert", "--to", "ours", "--checkpoint", str(megatron_run["ckpt"]),
                                   "--out", str(tmp_path / "ours")])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert (tmp_path / "ours" / "step-00000000" / "model.safetensors").is_file()
    run = CliRunner().invoke(app, ["convert", "--to", "megatron", "--checkpoint", str(tmp_path / "ours"),
                                   "--out", str(tmp_path / "meg")])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert (tmp_path / "meg" / "step-00000000" / "metadata.json").is_file()
    for args, msg in [(["--to", "hf"], "ours or megatron"), (["--to", "ours"], "already our checkpoint format")]:
        run = CliRunner().invoke(app, ["convert", *args, "--checkpoint", str(tmp_path / "ours"), "--out", "x"])
        assert run.exit_code == 2 and msg in run.output, run.output


def test_megatron_trainer_starts_from_converted_weights(megatron_run, small_shards):
    """``--init-from`` ours (converted from the run) or the run's Megatron checkpoint: step 0's loss
    is what our model gives on the first batch, and both starts train the same curve."""
    d = megatron_run["dir"]
    if not (d / "ours").is_dir():
        to_ours(megatron_run["ckpt"], d / "ours", **quiet)
    ours, _ = load_model(d / "ours")
    cfg = load_megatron_config(CONFIG, ["steps=2", "model.layernorm_epsilon=1e-6"])
    first = batches(cfg, small_shards["dir"], 1)[0]
    with torch.no_grad():
        expected = float(ours.loss(first.tokens, first.doc_lens)["lm_loss"])
    runs = {src: megatron_train(cfg, small_shards["dir"], init_from=src, **quiet).metrics
            for src in (d / "ours", megatron_run["ckpt"])}  # fmt: skip
    a, b = runs.values()
    assert abs(a[0]["lm_loss"] - expected) < 1e-5, (a[0], expected)
    assert [r["loss"] for r in a] == [r["loss"] for r in b]
    fresh = megatron_train(cfg, small_shards["dir"], **quiet).metrics
    assert abs(fresh[0]["lm_loss"] - expected) > 1e-3  # the weights are the checkpoint's, not a new init
