import torch

from tests.training.glm_tiny import tiny_model
from training.model.glm import GLMModel
from training.tools.megatron_bridge import to_megatron_state_dict


def build(**kw) -> GLMModel:
    torch.manual_seed(0)
    return GLMModel(tiny_model(vocab_size=60, **kw))


def test_depths_share_one_layer():
    one, three = build(mtp_num_layers=1), build(mtp_num_layers=3)
    n_one = sum(p.numel() for n, p in one.named_parameters() if n.startswith("mtp."))
    n_three = sum(p.numel() for n, p in three.named_parameters() if n.startswith("mtp."))
    assert n_one == n_three > 0  # no per-depth parameters
    # all depths use (and train) the same tensors: the gradient collects every depth's use
    toks, lens = torch.randint(0, 60, (2, 16)), [torch.tensor([16])] * 2
    grads = {}
    for depth in (1, 3):
        m = build(mtp_num_layers=depth, mtp_loss_scaling_factor=1.0)
        m.loss(toks, lens)["mtp_loss"].backward()
        grads[depth] = m.mtp.eh_proj.weight.grad.clone()
    assert not torch.allclose(grads[1], grads[3])
    # Megatron layout: one tensor under every depth's name, the same storage
    sd = to_megatron_state_dict(three.cfg, three.state_dict())
    ptrs = {sd[f"mtp.layers.{d}.eh_proj.weight"].data_ptr() for d in range(3)}
    assert len(ptrs) == 1 and ptrs == {three.mtp.eh_proj.weight.data_ptr()}


def test_mtp_loss_is_scaled_and_averaged_over_depths():
    toks, lens = torch.randint(0, 60, (2, 20)), [torch.tensor([9, 11]), torch.tensor([20])]
    m = build(mtp_num_layers=2, mtp_loss_scaling_factor=0.1)
    out = m.loss(toks, lens)
    assert torch.isclose(out["loss"], out["lm_loss"] + out["aux_loss"] + 0.1 * out["mtp_loss"])
    # depth d predicts token t+d+1 from the hidden state chain; recompute both depths by hand
    logits, hidden, _, (seg, pos, mask) = m(toks, lens, return_hidden=True)
    h, per_depth = hidden, []
    for d in (1, 2):
        h, _ = m.mtp(h, m.embedding.word_embeddings(torch.roll(toks, -d, 1)), pos, mask)
        lg = m.output_layer(h)[:, : -(d + 1)]
        tgt = toks[:, d + 1 :].clone()
        tgt[seg[:, d + 1 :] != seg[:, : -(d + 1)]] = -100  # never across a document boundary
        per_depth.append(
            torch.nn.functional.cross_entropy(lg.reshape(-1, 60), tgt.reshape(-1), ignore_index=-100)
        )
    assert torch.isclose(out["mtp_loss"], (per_depth[0] + per_depth[1]) / 2)
    none = build(mtp_num_layers=None)
    assert "mtp_loss" not in none.loss(toks, lens) and none.mtp is None
