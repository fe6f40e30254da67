import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.tools.megatron_bridge import (
    from_megatron_state_dict,
    megatron_names,
    to_megatron_config,
    to_megatron_state_dict,
)


def test_state_dict_under_megatron_te_names():
    torch.manual_seed(0)
    model = GLMModel(tiny_model(vocab_size=50))
    cfg, ours = model.cfg, model.state_dict()
    sd = to_megatron_state_dict(cfg, ours)
    E = cfg.num_moe_experts
    # dense layer 0: TE fuses the pre-MLP norm into fc1, the q/kv latent norms into the up-projections
    assert torch.equal(
        sd["decoder.layers.0.mlp.linear_fc1.layer_norm_weight"],
        ours["decoder.layers.0.pre_mlp_layernorm.weight"],
    )
    assert "decoder.layers.0.pre_mlp_layernorm.weight" not in sd
    assert "decoder.layers.1.pre_mlp_layernorm.weight" in sd  # MoE layers keep it
    assert torch.equal(
        sd["decoder.layers.1.self_attention.linear_kv_up_proj.layer_norm_weight"],
        ours["decoder.layers.1.self_attention.kv_layernorm.weight"],
    )
    assert sd["decoder.layers.1.self_attention.linear_kv_up_proj.weight"].shape == (
        cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim),
        cfg.kv_lora_rank,
    )
    # TEGroupedMLP: one weight per expert, [out, in]
    for e in range(E):
        assert torch.equal(
            sd[f"decoder.layers.2.mlp.experts.linear_fc1.weight{e}"],
            ours["decoder.layers.2.mlp.experts.linear_fc1.weight"][e],
        )
    assert sd["decoder.layers.2.mlp.experts.linear_fc2.weight0"].shape == (
        cfg.hidden_size,
        cfg.moe_ffn_hidden_size,
    )
    assert "decoder.layers.2.mlp.router.expert_bias" in sd and "embedding.word_embeddings.weight" in sd
    # MTP: one entry per depth
    assert {k.split(".")[2] for k in sd if k.startswith("mtp.layers.")} == {"0", "1"}
    assert "mtp.layers.1.transformer_layer.mlp.experts.linear_fc2.weight3" in sd
    # every tensor of ours lands somewhere; local-spec names for SequentialMLP experts
    assert all(megatron_names(cfg, list(ours)).values())
    local = to_megatron_state_dict(cfg, ours, spec="local")
    assert "decoder.layers.2.mlp.experts.local_experts.3.linear_fc1.weight" in local
    assert "decoder.layers.0.pre_mlp_layernorm.weight" in local


@pytest.mark.parametrize("spec", ["te", "local"])
def test_megatron_names_convert_back_to_ours(spec):
    """from_megatron_state_dict inverts to_megatron_state_dict (experts stacked back, the MTP
    layer read once); MTP depths that Megatron trained apart do not convert to our shared layer."""
    torch.manual_seed(0)
    model = GLMModel(tiny_model(vocab_size=50))  # two MTP depths
    ours = model.state_dict()
    meg = {k: v.clone() for k, v in to_megatron_state_dict(model.cfg, ours, spec).items()}
    back = from_megatron_state_dict(model.cfg, meg, list(ours), spec)
    assert set(back) == set(ours) and all(torch.equal(back[k], ours[k]) for k in ours)
    name = next(k for k in meg if k.startswith("mtp.layers.1.") and k.endswith("linear_kv_down_proj.weight"))
    meg[name] += 1e-3
    with pytest.raises(ValueError, match="MTP depths hold different weights"):
        from_megatron_state_dict(model.cfg, meg, list(ours), spec)


def test_dsa_indexer_names_and_config():
    cfg = tiny_model(vocab_size=50, dsa_indexer_n_heads=2, dsa_indexer_head_dim=16, dsa_indexer_topk=4)
    ours = GLMModel(cfg).state_dict()
    for spec in ("te", "local"):
        sd = to_megatron_state_dict(cfg, ours, spec=spec)
        assert torch.equal(
            sd["decoder.layers.1.self_attention.core_attention.indexer.linear_wq_b.weight"],
            ours["decoder.layers.1.self_attention.indexer.linear_wq_b.weight"],
        )
        assert "mtp.layers.0.transformer_layer.self_attention.core_attention.indexer.k_norm.bias" in sd
    m = to_megatron_config(cfg)
    assert m.experimental_attention_variant == "dsa"
    assert (m.dsa_indexer_n_heads, m.dsa_indexer_head_dim, m.dsa_indexer_topk) == (2, 16, 4)


@pytest.fixture(scope="module")
def megatron_one_rank():
    """Megatron's parallel_state on one gloo rank, torn down after the module.

    Megatron 0.16's ``RotaryEmbedding`` asks ``torch.cuda.current_device()`` even with
    ``use_cpu_initialization``; on a CPU-only torch that raises, so it is pointed at the CPU
    here (a test-only change; the GPU check runs unpatched on CUDA)."""
    import os

    import torch.distributed as dist
    from megatron.core import parallel_state

    from tests.training.test_expert_parallel import free_port

    cuda = torch.cuda.is_available()
    with pytest.MonkeyPatch.context() as mp:
        if not cuda:
            mp.setattr(torch.cuda, "current_device", lambda: "cpu")
        mp.setitem(os.environ, "MASTER_ADDR", "127.0.0.1")
        mp.setitem(os.environ, "MASTER_PORT", str(free_port()))
        dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
        parallel_state.initialize_model_parallel(1, 1)
        if cuda:  # Megatron's GPU weight init draws from its model-parallel CUDA RNG tracker
            from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

            model_parallel_cuda_manual_seed(0)
        try:
            yield torch.device("cuda" if cuda else "cpu")
        finally:
            parallel_state.destroy_model_parallel()
            dist.destroy_process_group()


def unambiguous_tokens(model: GLMModel, tries: int = 50) -> torch.Tensor:
    """Tokens for which every query's top-k is clear: the k-th and (k+1)-th index scores differ by
    more than fp32 rounding. A tie (ReLU makes exact zeros common) may be broken either way by
    any implementation; ours breaks ties by position, Megatron's ``topk`` arbitrarily."""
    from training.model.dsa import index_scores
    from training.model.mla import apply_rope, rope_cos_sin

    seen = []
    hooks = [
        m.register_forward_pre_hook(lambda mod, args: seen.append((mod, *args)))
        for _, m in model.attention_modules()
    ]
    try:
        for seed in range(tries):
            toks = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(seed))
            seen.clear()
            with torch.no_grad():
                model(toks, [torch.tensor([16])] * 2)
                clear = True
                for attn, x, positions, mask in seen:
                    cos, sin = rope_cos_sin(positions, attn.rope, attn.cfg.rotary_base)
                    _, _, qr = attn._queries(x, cos, sin)
                    qi, ki, wi = attn.indexer(x, qr, lambda t, c=cos, s=sin: apply_rope(t, c, s))
                    vals = index_scores(qi, ki, wi, mask[:, 0]).sort(dim=-1, descending=True).values
                    k = attn.cfg.dsa_indexer_topk
                    kth, nxt = vals[..., k - 1], vals[..., k]
                    decided = (nxt == float("-inf")) | (kth - nxt > 1e-4)
                    clear &= bool(decided.all())
            if clear:
                return toks
    finally:
        for h in hooks:
            h.remove()
    raise AssertionError(f"no token draw without top-k ties in {tries} tries")


@pytest.mark.parametrize("dsa", [False, True], ids=["mla-moe", "mla-moe-dsa"])
def test_megatron_gpt_model_gives_our_logits(megatron_one_rank, dsa):
    """Megatron's own GPTModel (local spec; see training/tools/megatron_local.py for the pieces it
    lacks without Transformer Engine) loaded with our converted weights gives our logits.
    Compared: embedding, every decoder layer (input norm, MLA down/up projections, q/kv latent
    norms, RoPE, attention, output projection; dense SwiGLU MLP; MoE router with sigmoid
    scores, expert bias, top-k scaling, experts, shared expert), final norm, output layer;
    with DSA also the indexer and top-k sparse attention (Megatron's DSAttention). Not
    compared: MTP (Megatron 0.16's GPTModel with MTP needs labels and returns only losses),
    packed-document masks (Megatron's local path is causal over the whole row)."""
    from training.tools.megatron_bridge import build_megatron_model

    device = megatron_one_rank
    extra = {"dsa_indexer_n_heads": 8, "dsa_indexer_head_dim": 16, "dsa_indexer_topk": 5} if dsa else {}
    torch.manual_seed(0)
    ours = GLMModel(tiny_model(vocab_size=64, mtp_num_layers=None, **extra)).eval()
    with torch.no_grad():  # non-trivial router bias and indexer, so routing and top-k matter
        for name, p in ours.named_parameters():
            if ".indexer." in name:
                p.normal_(std=0.3)
        for layer in ours.moe_layers():
            layer.router.expert_bias.normal_(std=0.1)
    dispatcher = "alltoall" if device.type == "cuda" else "allgather"  # alltoall makes a CUDA stream
    meg = build_megatron_model(
        ours.cfg, use_cpu_initialization=device.type == "cpu", moe_token_dispatcher_type=dispatcher
    )
    meg = meg.to(device).eval()
    missing, unexpected = meg.load_state_dict(
        to_megatron_state_dict(ours.cfg, ours.state_dict(), "local"), strict=False
    )
    assert not unexpected and all(k.endswith("_extra_state") for k in missing), (missing, unexpected)
    toks = unambiguous_tokens(ours) if dsa else torch.randint(0, 64, (2, 16))
    with torch.no_grad():
        expected = ours(toks, [torch.tensor([16])] * 2)
        got = (
            meg(toks.to(device), torch.arange(16).expand(2, 16).to(device), attention_mask=None).float().cpu()
        )
        ours.set_dsa_dense(True)
        dense = ours(toks, [torch.tensor([16])] * 2)
    assert (got - expected).abs().max() < 1e-4, (got - expected).abs().max()
    if dsa:  # top-5 of 16 keys really changes the result, and Megatron agrees on which
        assert (dense - expected).abs().max() > 1e-2
