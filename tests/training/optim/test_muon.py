import math

import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.doc_mask import document_causal_mask, segment_ids
from training.model.glm import GLMModel
from training.model.mla import MLA
from training.optim.muon import Muon, newton_schulz, ns_flops
from training.optim.optimizers import OptimizerConfig, build_optimizer, qk_clip_, route_params


@pytest.mark.parametrize("shape", [(32, 128), (128, 32), (48, 64), (3, 24, 96)])
def test_newton_schulz_singular_values_in_band(shape):
    torch.manual_seed(0)
    G = torch.randn(*shape) * 7.0
    X = newton_schulz(G)
    s = torch.linalg.svdvals(X)
    assert s.min() > 0.5 and s.max() < 1.5, (s.min(), s.max())
    # same singular vectors: X ~ U f(S) V^T, so U^T X V is (nearly) diagonal and positive
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    D = U.mT @ X @ Vh.mT
    diag = torch.diagonal(D, dim1=-2, dim2=-1)
    assert (diag > 0.5).all() and (D - torch.diag_embed(diag)).abs().max() < 1e-3


def test_update_rms_matches_adamw_scale_for_any_shape():
    torch.manual_seed(0)
    for rows, cols in [(16, 256), (256, 16), (64, 64 + 32)]:
        p = torch.nn.Parameter(torch.zeros(rows, cols))
        opt = Muon([{"params": [p], "use_muon": True}], lr=1.0, weight_decay=0.0)
        p.grad = torch.randn(rows, cols)
        opt.step()
        rms = p.detach().pow(2).mean().sqrt().item()
        assert 0.14 < rms < 0.24, (rows, cols, rms)


def test_momentum_nesterov_and_decoupled_weight_decay():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(8, 24))
    w0 = p.detach().clone()
    opt = Muon([{"params": [p], "use_muon": True}], lr=0.1, weight_decay=0.5, momentum=0.9)
    g1, g2 = torch.randn(8, 24), torch.randn(8, 24)
    scale = 0.2 * math.sqrt(24)
    p.grad = g1
    opt.step()
    w1 = w0 * (1 - 0.05) - 0.1 * scale * newton_schulz(g1 + 0.9 * g1)
    assert torch.allclose(p.detach(), w1, atol=1e-6)
    p.grad = g2
    opt.step()
    buf = 0.9 * g1 + g2
    w2 = w1 * (1 - 0.05) - 0.1 * scale * newton_schulz(g2 + 0.9 * buf)
    assert torch.allclose(p.detach(), w2, atol=1e-6)


def test_adamw_part_matches_torch_adamw():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(5, 3))
    b = torch.nn.Parameter(a.detach().clone())
    ours = Muon([{"params": [a]}], lr=0.01, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8)
    ref = torch.optim.AdamW([b], lr=0.01, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8)
    for _ in range(4):
        g = torch.randn(5, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.allclose(a, b, atol=1e-6)


def model() -> GLMModel:
    torch.manual_seed(0)
    return GLMModel(tiny_model(vocab_size=40))


def test_parameter_group_routing_is_as_documented():
    m = model()
    routes = route_params(m, OptimizerConfig(name="muon_split"))
    assert set(routes) == {n for n, _ in m.named_parameters()}
    assert routes["embedding.word_embeddings.weight"] == routes["output_layer.weight"] == "adamw"
    for name, p in m.named_parameters():
        if p.ndim == 1:
            assert routes[name] == "adamw_no_wd", name  # norms (and biases)
        elif name.endswith(("linear_q_up_proj.weight", "linear_kv_up_proj.weight")):
            assert routes[name] == "muon_split", name
        elif name not in ("embedding.word_embeddings.weight", "output_layer.weight"):
            assert routes[name] == "muon", name
    assert routes["decoder.layers.1.mlp.experts.linear_fc1.weight"] == "muon"
    assert routes["decoder.layers.1.mlp.router.weight"] == "muon"
    assert routes["mtp.eh_proj.weight"] == "muon"
    assert routes["mtp.transformer_layer.self_attention.linear_kv_up_proj.weight"] == "muon_split"
    assert "muon_split" not in route_params(m, OptimizerConfig(name="muon")).values()
    assert set(route_params(m, OptimizerConfig(name="adamw")).values()) == {"adamw", "adamw_no_wd"}
    # the expert bias is a buffer: no optimizer touches it
    assert "decoder.layers.1.mlp.router.expert_bias" not in routes
    opt = build_optimizer(m, OptimizerConfig(name="muon_split", weight_decay=0.1))
    wd = {n: g["weight_decay"] for g in opt.param_groups for n in g["names"]}
    assert wd["decoder.final_layernorm.weight"] == 0.0 and wd["output_layer.weight"] == 0.1


def test_muon_split_equals_per_head_newton_schulz_on_each_slice():
    updates = {}
    for name in ("muon_split", "muon"):
        m = model()
        opt = build_optimizer(m, OptimizerConfig(name=name, lr=1.0, weight_decay=0.0))
        torch.manual_seed(1)
        for p in m.parameters():
            p.grad = torch.randn_like(p)
        attn = m.decoder.layers[0].self_attention
        before = {
            k: getattr(attn, k).weight.detach().clone() for k in ("linear_kv_up_proj", "linear_q_up_proj")
        }
        grads = {k: getattr(attn, k).weight.grad.clone() for k in before}
        opt.step()
        updates[name] = {k: before[k] - getattr(attn, k).weight.detach() for k in before}
    cfg = attn.cfg
    H, qk, v, r = cfg.num_attention_heads, cfg.qk_head_dim, cfg.v_head_dim, cfg.kv_lora_rank

    def ns_scaled(x):
        return newton_schulz(x) * 0.2 * math.sqrt(max(x.shape))

    u = grads["linear_kv_up_proj"] * (1 + 0.95)  # first Nesterov step: g + mu * g
    per_head = u.view(H, qk + v, r)
    expected = torch.cat(
        [torch.cat((ns_scaled(per_head[h, :qk]), ns_scaled(per_head[h, qk:])), 0) for h in range(H)]
    )
    assert torch.allclose(updates["muon_split"]["linear_kv_up_proj"], expected, atol=1e-5)
    uq = (grads["linear_q_up_proj"] * 1.95).view(H, cfg.q_head_dim, -1)
    expected_q = torch.cat([ns_scaled(uq[h]) for h in range(H)])
    assert torch.allclose(updates["muon_split"]["linear_q_up_proj"], expected_q, atol=1e-5)
    # plain Muon orthogonalizes the whole matrix: a different update
    assert torch.allclose(updates["muon"]["linear_kv_up_proj"], ns_scaled(u), atol=1e-5)
    assert not torch.allclose(updates["muon"]["linear_kv_up_proj"], expected, atol=1e-3)


def test_per_head_newton_schulz_is_cheaper_for_glm5_shapes():
    H, q_lora, kv_lora, qk, rope, v = 64, 2048, 512, 192, 64, 256
    fused = ns_flops(H * (qk + rope), q_lora) + ns_flops(H * (qk + v), kv_lora)
    split = H * (ns_flops(qk + rope, q_lora) + ns_flops(qk, kv_lora) + ns_flops(v, kv_lora))
    assert split <= fused / 3


def test_qk_clip_caps_each_offending_head_at_tau():
    torch.manual_seed(0)
    cfg = tiny_model()
    attn = MLA(cfg)
    with torch.no_grad():
        attn.linear_q_up_proj.weight.view(4, cfg.q_head_dim, -1)[:2] *= 40  # heads 0, 1 blow up
        attn.linear_kv_up_proj.weight.mul_(3)
    x = torch.randn(2, 10, cfg.hidden_size)
    mask = document_causal_mask(segment_ids([torch.tensor([10])] * 2, 10))
    attn.record_max_logits = True
    attn(x, torch.arange(10).expand(2, 10), mask)
    before = attn.max_logits.clone()
    tau = float(before[2:].max()) * 1.5
    assert (before[:2] > tau).all()
    w_before = attn.linear_q_up_proj.weight.detach().clone().view(4, cfg.q_head_dim, -1)

    class Holder(torch.nn.Module):
        def attention_modules(self):
            yield "attn", attn

    assert qk_clip_(Holder(), tau) == 2
    attn(x, torch.arange(10).expand(2, 10), mask)
    assert torch.allclose(attn.max_logits[:2], torch.full((2,), tau), rtol=1e-4)
    assert torch.allclose(attn.max_logits[2:], before[2:], rtol=1e-5)
    assert torch.equal(attn.linear_q_up_proj.weight.view(4, cfg.q_head_dim, -1)[2:], w_before[2:])
