"""GLM-5's template on a Hugging Face model (``model.chat_template: glm5``, training.sft.hf_data):
a tiny random LlamaForCausalLM with the real SmolLM2 tokenizer. Each thinking mode trains what our
own model's SFT trains for the same conversation; the saved tokenizer round-trips and prompts as
trained (transformers' apply_chat_template, the next stage's policy); a short training lowers the
held-out loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import decoders

from core.config import load_config
from core.errors import ConfigError
from tests.training.chat_template.test_template import CONV, TOOLS
from tests.training.chat_tok import chat_tokenizer
from training.chat_template import MODES, SPECIAL_TOKENS, STOP_TOKENS, generation_prompt, glm5_jinja, render
from training.sft.__main__ import SFTConfig, run
from training.sft.data import DataConfig, ReadReport, tokenized_samples
from training.sft.hf_data import add_glm5_tokens, glm5_samples, grow_embeddings

ROOT = Path(__file__).resolve().parents[3]


def hf_glm5_tok(tiny_hf: Path, mode: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_hf))
    assert add_glm5_tokens(tok, mode) == len(SPECIAL_TOKENS) - 1  # SmolLM2 has <|endoftext|> already
    return tok


def trained_runs(ids, mask, decode) -> list[str]:
    """The trained text, one string per run of trained tokens."""
    runs, cur = [], []
    for i, m in [*zip(ids, mask, strict=True), (None, 0)]:
        if m:
            cur.append(i)
        elif cur:
            runs.append(decode(cur))
            cur = []
    return runs


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_trains_what_our_model_path_trains(tiny_hf, tmp_path, mode):
    data_file = tmp_path / "c.jsonl"
    data_file.write_text(json.dumps({"messages": CONV, "tools": TOOLS}) + "\n")
    data = DataConfig(datasets=[{"path": str(data_file)}], mode=mode, max_context=4096)
    hf = hf_glm5_tok(tiny_hf, mode)
    ours = chat_tokenizer("hello world A1 A2 R1 R2 path ls tool")
    ours.decoder = decoders.ByteLevel()
    (hf_samples,) = glm5_samples(data, hf, ReadReport()).values()
    (our_samples,) = tokenized_samples(data, ours, ReadReport()).values()
    rendered = render(CONV, mode, TOOLS)
    assert len(hf_samples) == len(our_samples) == len(rendered) == (1 if mode == "preserved" else 2)
    special = set(SPECIAL_TOKENS)
    for (h_ids, h_mask), (o_ids, o_mask), s in zip(hf_samples, our_samples, rendered, strict=True):
        want = [s.text[a:b] for a, b in s.spans]
        assert trained_runs(h_ids, h_mask, lambda x: hf.decode(x, skip_special_tokens=False)) == want
        assert trained_runs(o_ids, o_mask, lambda x: ours.decode(x, skip_special_tokens=False)) == want
        # the trained template tokens, as token strings, are the same in both vocabularies
        h_tokens = [
            t for t, m in zip(hf.convert_ids_to_tokens(h_ids), h_mask, strict=True) if m and t in special
        ]
        o_tokens = [
            ours.id_to_token(i)
            for i, m in zip(o_ids, o_mask, strict=True)
            if m and ours.id_to_token(i) in special
        ]
        assert h_tokens == o_tokens and "<|user|>" in h_tokens and "<|assistant|>" not in h_tokens
        assert h_ids == hf(s.text, add_special_tokens=False)["input_ids"]  # as the whole text encodes
    if mode == "interleaved":  # by hand: turn 1's thinking is cleared in the second sample
        assert want == ["R2</think>" + "<tool_call>ls<arg_key>path</arg_key><arg_value>/</arg_value><arg_key>n"
                        "</arg_key><arg_value>3</arg_value></tool_call><|observation|>", "R3</think>A2<|user|>"]  # fmt: skip


@pytest.mark.parametrize("tied", [True, False])
def test_new_embedding_rows_are_the_mean_of_the_old(tied):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, tie_word_embeddings=tied))  # fmt: skip
    old_in = model.get_input_embeddings().weight.detach().clone()
    old_out = model.get_output_embeddings().weight.detach().clone()
    assert grow_embeddings(model, 53) == 3 and grow_embeddings(model, 53) == 0
    new_in, new_out = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert new_in.shape == new_out.shape == (53, 16) and model.config.vocab_size == 53
    assert torch.equal(new_in[:50], old_in) and torch.equal(new_out[:50], old_out)
    assert torch.allclose(new_in[50:], old_in.mean(0).expand(3, -1))
    assert torch.allclose(new_out[50:], old_out.mean(0).expand(3, -1))
    assert (new_in.data_ptr() == new_out.data_ptr()) == tied


def test_glm5_sft_lowers_loss_and_saves_a_tokenizer_that_prompts_as_trained(tiny_hf, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.policy import load_policy

    monkeypatch.chdir(ROOT)
    cfg = load_config(SFTConfig, ROOT / "configs/sft_tiny.yaml",
                      [f"model.hf={tiny_hf}", "model.chat_template=glm5", "model.heldout=4", "train.steps=20",
                       "data.max_context=512", f"out={tmp_path}"])  # fmt: skip
    s = run(cfg, log=lambda _m: None)
    print(json.dumps(s))
    assert s["chat_template"] == "glm5" and s["added_tokens"] == len(SPECIAL_TOKENS) - 1
    assert s["heldout_loss_after"] < s["heldout_loss_before"] - 0.5, s

    saved = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert (
        (tmp_path / "hf" / "chat_template.jinja").read_text()
        == glm5_jinja("interleaved")
        == saved.chat_template
    )
    fresh = hf_glm5_tok(tiny_hf, "interleaved")
    assert all(
        saved.backend_tokenizer.token_to_id(t) == fresh.backend_tokenizer.token_to_id(t)
        for t in SPECIAL_TOKENS
    )
    assert set(SPECIAL_TOKENS) <= set(saved.all_special_tokens)
    # the saved tokenizer makes the samples that were trained, id for id
    assert glm5_samples(cfg.data, saved, ReadReport()) == glm5_samples(cfg.data, fresh, ReadReport())
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "reasoning_content": "2 and 2", "content": "4"}]  # fmt: skip
    (sample,) = render(msgs, "interleaved")
    assert saved.apply_chat_template(msgs, tokenize=False) + "<|user|>" == sample.text
    prompt = generation_prompt(msgs[:2])
    assert saved.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True) == prompt

    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"))
    assert model.config.vocab_size == len(saved) == len(fresh)
    stops = [saved.backend_tokenizer.token_to_id(t) for t in STOP_TOKENS]
    assert model.generation_config.eos_token_id == stops
    policy = load_policy(tmp_path / "hf")  # the next stage (RL, serving) prompts and stops as trained
    assert policy.codec.chat_prompt(msgs[:2]) == saved(prompt, add_special_tokens=False)["input_ids"]
    assert set(stops) <= set(policy.codec.stop_ids)


def test_glm5_template_is_for_hf_models(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(
        SFTConfig, ROOT / "configs/sft_tiny.yaml", ["model.chat_template=glm5", f"out={tmp_path}"]
    )
    with pytest.raises(ConfigError, match="model.chat_template"):
        run(cfg, log=lambda _m: None)
