import torch

from training.model.tiny_lm import TinyLM, TinyLMConfig


def test_no_attention_across_documents():
    torch.manual_seed(0)
    model = TinyLM(
        TinyLMConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_seq_len=16)
    ).eval()
    lens = [torch.tensor([6, 10])]
    a = torch.randint(0, 50, (1, 16))
    b = a.clone()
    b[0, :6] = (b[0, :6] + 7) % 50  # change only the first document
    with torch.no_grad():
        la, lb = model(a, lens), model(b, lens)
    assert torch.allclose(la[0, 6:], lb[0, 6:], atol=1e-6)  # second document unaffected
    assert not torch.allclose(la[0, :6], lb[0, :6])
    with torch.no_grad():
        lc = model(b, [torch.tensor([16])])  # one document: now it sees the change
    assert not torch.allclose(la[0, 6:], lc[0, 6:])


def test_loss_ignores_targets_across_boundaries():
    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_seq_len=8))
    toks = torch.randint(0, 20, (1, 8))
    lens = [torch.tensor([4, 4])]
    with torch.no_grad():
        logits = model(toks, lens)[0]
        # positions 0..6 predict 1..7, except 3 -> 4, which crosses into the next document
        keep = [0, 1, 2, 4, 5, 6]
        manual = torch.nn.functional.cross_entropy(logits[keep], toks[0, [k + 1 for k in keep]])
        assert torch.allclose(model.loss(toks, lens), manual)
        everything = torch.nn.functional.cross_entropy(logits[:7], toks[0, 1:])
        assert not torch.allclose(model.loss(toks, lens), everything)
