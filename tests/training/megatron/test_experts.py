"""Our grouped GEMM as the experts of Megatron's MoE layer (``megatron.experts: grouped_gemm``).

Two Megatron GPTModels from the same converted weights of ours, one with Megatron's own experts
(``SequentialMLP``, what runs on CPU; its ``GroupedMLP`` needs the CUDA ``grouped_gemm`` package
and bf16) and one with ours (Megatron's ``GroupedMLP`` on ``moe_kernels.reference.grouped_gemm`` here,
the Triton kernel on CUDA): the same per-token losses, MTP included, and the same gradients for
every parameter (the experts' compared through the same stacking as the weights). A dist
checkpoint of ours loads into ``SequentialMLP`` tensor for tensor (``convert.py``'s path).
Measured: losses and gradients equal (0.0 difference) on the reference, and on the Triton kernel
itself run by Triton's CPU interpreter in a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.training.glm_tiny import tiny_model
from tests.training.megatron.launch import CONFIG, ROOT

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.fixture
def one_rank():
    from training.megatron.convert import one_rank

    torch.set_num_threads(1)
    with one_rank():
        yield


def _model(cfg, ours_sd, experts):
    from training.megatron.weights import load_our_weights
    from training.tools.megatron_bridge import build_megatron_model

    meg = build_megatron_model(cfg, experts=experts, use_cpu_initialization=True, moe_token_dispatcher_type="allgather")
    load_our_weights(meg, cfg, ours_sd)
    return meg


def test_our_grouped_gemm_experts_equal_megatrons_inside_its_moe_layer(one_rank, tmp_path):
    from training.megatron import checkpoint
    from training.megatron.experts import grouped_gemm_experts_class, stack_expert_weights
    from training.model.glm import GLMModel

    torch.manual_seed(0)
    cfg = tiny_model(vocab_size=64, mtp_num_layers=1)
    ours = GLMModel(cfg)
    with torch.no_grad():  # a non-trivial bias: routing matters
        for layer in ours.moe_layers():
            layer.router.expert_bias.normal_(std=0.1)
    sd = ours.state_dict()
    theirs, mine = _model(cfg, sd, None), _model(cfg, sd, grouped_gemm_experts_class())
    tokens = torch.randint(0, 64, (2, 16))
    pos, labels = torch.arange(16).expand(2, 16), torch.roll(tokens, -1, 1)
    losses = {}
    for name, meg in (("megatron", theirs), ("ours", mine)):
        per_token = meg(tokens, pos, None, labels=labels, loss_mask=torch.ones(2, 16))
        per_token.sum().backward()  # the MTP loss joins through Megatron's MTP autograd hook
        losses[name] = per_token.detach()
    moe = [*mine.decoder.layers[1:], mine.mtp.layers[0].transformer_layer]  # the MTP layer's too
    assert {type(m.mlp.experts).__name__ for m in moe} == {"GroupedGemmExperts"}
    # CPU: the pure-torch reference; the Triton kernel under its interpreter (the test below)
    assert mine.decoder.layers[1].mlp.experts.kernel == ("triton" if INTERPRET else "reference")
    print(f"max |loss difference| {(losses['ours'] - losses['megatron']).abs().max():.1e}")
    assert (losses["ours"] - losses["megatron"]).abs().max() < 1e-5
    want = stack_expert_weights({n: p.grad for n, p in theirs.named_parameters()})
    got = {n: p.grad for n, p in mine.named_parameters()}
    assert set(got) == set(want)
    rel = {n: float((g - want[n]).abs().max() / want[n].abs().max().clamp_min(1e-12)) for n, g in got.items()}
    print(f"max relative gradient difference {max(rel.values()):.1e}")
    assert all(v < 1e-5 for v in rel.values()), rel

    # ours -> dist checkpoint -> Megatron's SequentialMLP: every tensor as Megatron's own holds it
    checkpoint.save(tmp_path, 0, [mine], None, {})
    fresh = _model(cfg, GLMModel(cfg).state_dict(), None)  # other weights, overwritten by the load
    checkpoint.load_weights(tmp_path / "step-00000000", [fresh])
    expected = {k: v for k, v in theirs.state_dict().items() if not k.endswith("_extra_state")}
    loaded = fresh.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in expected.items())


@pytest.mark.slow  # a fresh interpreter importing Megatron and Triton: a minute on 2 shared cores
@pytest.mark.skipif(INTERPRET or torch.cuda.is_available(), reason="this is the interpreter run itself / CUDA")
def test_the_triton_kernel_itself_inside_megatrons_moe_layer():
    """The test above with ``TRITON_INTERPRET=1`` set before triton is imported: our experts then
    run the real Triton grouped GEMM (forward, dX, dW kernels) on CPU tensors."""
    test = "tests/training/megatron/test_experts.py::test_our_grouped_gemm_experts_equal_megatrons_inside_its_moe_layer"
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", test], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
    print([line for line in r.stdout.splitlines() if line.startswith("max ")])


def test_training_with_our_experts_equals_megatrons_own(small_shards):
    """The trainer with ``megatron.experts: grouped_gemm`` (MuonSplit: each expert of the stack
    orthogonalised as its own matrix) follows the run with Megatron's experts. Measured over 3
    steps: losses within 1e-6, grad norms within 1e-6 relative."""
    from training.megatron.train import load_megatron_config, train

    runs = {}
    for experts in ("megatron", "grouped_gemm"):
        cfg = load_megatron_config(CONFIG, ["steps=3", f"megatron.experts={experts}"])
        runs[experts] = train(cfg, small_shards["dir"], log=lambda m: None).metrics
    for a, b in zip(runs["megatron"], runs["grouped_gemm"], strict=True):
        print({k: (a[k], b[k]) for k in ("loss", "lm_loss", "mtp_loss", "grad_norm")})
        for k in ("loss", "lm_loss", "mtp_loss"):
            assert abs(a[k] - b[k]) < 1e-5, (k, a, b)
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-5 * a["grad_norm"], (a, b)
