"""The MoE layer on ``moe_backend: triton`` equals the torch backend, forward and backward."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from tests.moe_kernels.conftest import DEVICE, ON_GPU, needs_kernels
from tests.training.glm_tiny import tiny_model
from training.model.moe import MoELayer, get_backend

pytestmark = needs_kernels
ROOT = Path(__file__).resolve().parents[2]

CONFIGS = {
    "glm5_like": {},  # sigmoid, expert bias, shared expert, top-k scaling 2.5
    "group_limited": dict(
        num_moe_experts=8, moe_router_topk=4, moe_router_num_groups=4, moe_router_group_topk=2
    ),
    "softmax_no_bias": dict(moe_router_score_function="softmax", moe_router_enable_expert_bias=False),
    "seq_aux_loss": dict(moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=0.01),
    "many_experts_top8": dict(
        num_moe_experts=24, moe_router_topk=8, moe_shared_expert_intermediate_size=None
    ),
}


def _pair(**kw) -> tuple[MoELayer, MoELayer]:
    torch.manual_seed(0)
    ref = MoELayer(tiny_model(**kw))
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    if ref.router.expert_bias is not None:
        ref.router.expert_bias.copy_(torch.randn(ref.num_experts) * 0.1)
    ker = MoELayer(tiny_model(moe_backend="triton", **kw))
    ker.load_state_dict(ref.state_dict())
    return ref.to(DEVICE), ker.to(DEVICE)


@pytest.mark.parametrize("name", CONFIGS)
def test_layer_forward_backward_equal_on_both_backends(name):
    ref, ker = _pair(**CONFIGS[name])
    ref.train(), ker.train()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 13, ref.cfg.hidden_size, generator=g).to(DEVICE)
    d_out = torch.randn(2, 13, ref.cfg.hidden_size, generator=g).to(DEVICE)
    results = []
    for m in (ref, ker):
        xi = x.clone().requires_grad_()
        out, aux = m(xi)
        ((out * d_out).sum() + aux).backward()
        grads = {n: p.grad for n, p in m.named_parameters()}
        results.append((out, aux, xi.grad, grads, m.router.local_tokens_per_expert.clone()))
    (out, aux, dx, grads, load), (k_out, k_aux, k_dx, k_grads, k_load) = results
    assert_close(k_out, out)
    assert_close(k_aux, aux)
    assert_close(k_dx, dx, atol=1e-4, rtol=1e-4)
    assert grads.keys() == k_grads.keys()
    for n in grads:
        assert_close(k_grads[n], grads[n], atol=1e-4, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
    if ref.router.expert_bias is not None:  # the load that drives the bias update is identical
        assert torch.equal(k_load, load) and load.sum() == 2 * 13 * ref.cfg.moe_router_topk
        ref.update_expert_bias(), ker.update_expert_bias()
        assert torch.equal(ker.router.expert_bias, ref.router.expert_bias)


def test_triton_backend_is_the_kernels():
    from moe_kernels import grouped_gemm, permute

    be = get_backend("triton")
    assert be.experts is grouped_gemm.expert_ffn
    assert be.permute is permute.permute and be.unpermute is permute.unpermute


@pytest.mark.skipif(ON_GPU, reason="checks the CPU-only refusal")
def test_triton_backend_without_cuda_or_interpreter_is_a_config_error():
    code = (
        "import torch\n"
        "from core.errors import ConfigError\n"
        "from tests.training.glm_tiny import tiny_model\n"
        "from training.model.moe import MoELayer\n"
        "try:\n"
        "    MoELayer(tiny_model(moe_backend='triton'))\n"
        "except ConfigError as e:\n"
        "    print('CONFIG', e)\n"
        "from moe_kernels.permute import permute\n"
        "try:\n"
        "    permute(torch.zeros(2, 4), torch.zeros(2, 1, dtype=torch.long), 3)\n"
        "except RuntimeError as e:\n"
        "    print('RUNTIME', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "CONFIG model.moe_backend: the Triton kernels" in r.stdout and "CUDA GPU" in r.stdout
    assert "RUNTIME a cpu tensor was given to a compiled Triton kernel" in r.stdout
