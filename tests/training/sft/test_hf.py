"""SFT of a Hugging Face causal LM (training.sft.hf): a tiny random LlamaForCausalLM made by
transformers itself, with the real SmolLM2 tokenizer and chat template (core.local_lm), trained
on the bundled sample conversations through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.config import load_config
from training.chat_template import Reject
from training.sft.__main__ import SFTConfig, run
from training.sft.hf_data import encode_hf

ROOT = Path(__file__).resolve().parents[3]


def test_mask_covers_exactly_the_assistant_turns(hf_tok):
    msgs = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "6", "reasoning_content": "3 and 3"}]  # fmt: skip
    ids, mask = encode_hf(msgs, [], hf_tok)
    trained = hf_tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert trained == "4<|im_end|>\n<think>3 and 3</think>6<|im_end|>\n"
    untrained = hf_tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert "What is 2+2?" in untrained and "<|im_start|>assistant\n" in untrained and "6" not in untrained


def test_tool_calls_are_kept_in_the_content(hf_tok):
    msgs = [{"role": "user", "content": "list files"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "run", "arguments": '{"cmd": "ls"}'}}]},
            {"role": "tool", "content": "a.py"}, {"role": "assistant", "content": "a.py"}]  # fmt: skip
    ids, mask = encode_hf(msgs, [{"type": "function", "function": {"name": "run"}}], hf_tok)
    trained = hf_tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert '"name": "run"' in trained and '"arguments"' in trained and trained.endswith("a.py<|im_end|>\n")
    assert "Tools:" in hf_tok.decode(ids)


def test_template_that_rewrites_history_is_rejected(hf_tok, tiny_hf):
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(str(tiny_hf))
    # drops every assistant message but the last: the shorter rendering is no prefix of the whole
    t.chat_template = ("{% for m in messages %}{% if m.role != 'assistant' or loop.last %}"
                       "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
                       "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")  # fmt: skip
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]  # fmt: skip
    with pytest.raises(Reject) as err:
        encode_hf(msgs, [], t)
    assert err.value.reason == "template_not_prefix_stable"


def test_sft_trains_an_hf_model_and_saves_an_hf_directory(tiny_hf, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.chdir(ROOT)  # the config's dataset paths are repo-relative
    cfg = load_config(SFTConfig, ROOT / "configs/sft_tiny.yaml",
                      [f"model.hf={tiny_hf}", "model.heldout=4", "train.steps=25", f"out={tmp_path}"])  # fmt: skip
    s = run(cfg, log=lambda _m: None)
    print(json.dumps(s))
    assert s["heldout_samples"] == 4 and s["trained_steps"] == 25
    assert s["heldout_loss_after"] < s["heldout_loss_before"] - 0.5, s
    assert sum(s["samples"].values()) + sum(s["rejects"].values()) == s["conversations"]  # one sample each
    assert json.loads((tmp_path / "sft.json").read_text())["heldout_loss_after"] == s["heldout_loss_after"]
    back = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"))
    saved = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert saved.chat_template and back.config.vocab_size == len(saved)
    # the saved weights are the trained ones, not the start
    start = AutoModelForCausalLM.from_pretrained(str(tiny_hf))
    assert not torch.equal(back.model.layers[0].mlp.up_proj.weight, start.model.layers[0].mlp.up_proj.weight)


def test_cli_rejects_a_directory_that_is_no_hf_model(tmp_path, monkeypatch):
    from core.errors import InputError

    monkeypatch.chdir(ROOT)
    cfg = load_config(
        SFTConfig, ROOT / "configs/sft_tiny.yaml", [f"model.hf={tmp_path}", f"out={tmp_path}/o"]
    )
    with pytest.raises(InputError, match="no config.json"):
        run(cfg, log=lambda _m: None)


def test_cli_from_another_directory_with_the_default_config(tiny_hf, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM
    from typer.testing import CliRunner

    from training.sft.__main__ import app

    monkeypatch.chdir(tmp_path)  # the bundled sample datasets are found from the repository
    res = CliRunner().invoke(app, ["--out", "o", "--set", f"model.hf={tiny_hf}", "--set", "train.steps=2"])
    assert res.exit_code == 0, res.output
    assert "trained 2 steps" in res.output
    assert AutoModelForCausalLM.from_pretrained(str(tmp_path / "o" / "hf")).config.vocab_size > 0


def _tiny(kind: str, **extra):
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, f"{kind}Config")(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                 num_attention_heads=4, num_key_value_heads=2, head_dim=8, **extra)  # fmt: skip
    return getattr(transformers, f"{kind}ForCausalLM")(cfg).eval()


def _full_ce(model, ids, mask, attn):
    logits = model(input_ids=ids, attention_mask=attn).logits
    targets = ids[:, 1:].clone()
    targets[mask[:, 1:] == 0] = -100
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 64).float(), targets.reshape(-1), ignore_index=-100)


def test_sft_loss_runs_the_head_only_where_tokens_are_trained():
    """The loss (and its gradient) equal the full forward's masked cross-entropy, on right-padded rows
    whose prompts are not trained; the head sees only the trained positions."""
    from training.policy.hf import head_split
    from training.sft.hf import batch_of, sft_loss

    model = _tiny("Llama")
    rows = [([5, 6, 7, 8, 9, 10], [0, 0, 0, 1, 1, 1]), ([11, 12, 13, 14], [0, 0, 1, 1])]
    ids, mask, attn = batch_of(rows, pad_id=0)
    assert head_split(model) is not None
    seen = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, o: seen.append(o.shape[:-1]))
    loss = sft_loss(model, ids, mask, attn)
    hook.remove()
    assert seen == [torch.Size([5])]  # 3 + 2 trained next tokens, not 2 rows x 5 positions
    want = _full_ce(model, ids, mask, attn)
    assert float(loss) == pytest.approx(float(want), abs=1e-6)
    g = torch.autograd.grad(loss, model.model.layers[0].mlp.up_proj.weight)[0]
    g_want = torch.autograd.grad(_full_ce(model, ids, mask, attn), model.model.layers[0].mlp.up_proj.weight)[0]
    assert torch.allclose(g, g_want, atol=1e-6)


def test_sft_loss_keeps_the_full_forward_where_logits_are_changed_after_the_head():
    """Gemma 2 soft-caps its logits after the head: head(decoder(x)) is not its logits, so the
    split is refused and the loss is the full forward's."""
    from training.policy.hf import head_split
    from training.sft.hf import batch_of, sft_loss

    model = _tiny("Gemma2", final_logit_softcapping=0.5)
    assert head_split(model) is None
    ids, mask, attn = batch_of([([5, 6, 7, 8], [0, 0, 1, 1])], pad_id=0)
    assert float(sft_loss(model, ids, mask, attn)) == pytest.approx(float(_full_ce(model, ids, mask, attn)), abs=1e-6)
