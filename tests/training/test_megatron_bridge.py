import pytest
import torch

from tests.training.glm_tiny import tiny_model
from training.glm_model import GLMModel
from training.megatron_bridge import megatron_names, to_megatron_state_dict


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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="Megatron builds MoE/MLA GPT models only with CUDA")
def test_megatron_gpt_model_gives_our_logits(tmp_path):
    pytest.importorskip("transformer_engine", reason="Megatron's MLA layer spec needs Transformer Engine")
    import os

    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    from training.megatron_bridge import build_megatron_model

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(0)
    try:
        torch.manual_seed(0)
        # no MTP here: Megatron 0.16's GPTModel needs labels (and returns losses) when it has MTP
        ours = GLMModel(tiny_model(vocab_size=64, mtp_num_layers=None)).eval()
        meg = build_megatron_model(ours.cfg).cuda().eval()
        missing, unexpected = meg.load_state_dict(
            to_megatron_state_dict(ours.cfg, ours.state_dict()), strict=False
        )
        assert not unexpected and all(k.endswith("_extra_state") for k in missing), (missing, unexpected)
        toks = torch.randint(0, 64, (2, 16))
        with torch.no_grad():
            expected = ours(toks, [torch.tensor([16])] * 2)
            got = meg(toks.cuda(), torch.arange(16).expand(2, 16).cuda(), attention_mask=None)
        assert torch.allclose(got.float().cpu(), expected, atol=2e-3), (got.cpu() - expected).abs().max()
    finally:
        parallel_state.destroy_model_parallel()
