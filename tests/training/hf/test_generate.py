"""An exported checkpoint generates, with transformers' own ``generate`` (KV cache, greedy), the
same tokens as our sampler; its tokenizer travels along and loads with AutoTokenizer."""

from __future__ import annotations

import pytest
import torch

from tests.training.conftest import make_tokenizer
from training.hf.convert import export_checkpoint
from training.hf.parity import write_ours
from training.hf.tiny import our_config, perturb
from training.model.glm import GLMModel
from training.serving.sampler import SamplingParams, sample

PROMPTS = [[3, 17, 42, 8, 9], [50, 2, 2, 61, 7, 30, 11]]
NEW = 10  # prompt + new tokens > DSA top-k 4: decoding selects


@pytest.mark.parametrize("arch", ["glm_moe_dsa", "deepseek_v3"])  # our sampler decodes MLA only
def test_greedy_generate_equals_our_sampler(arch, tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    ours = GLMModel(our_config(arch, mtp_num_layers=None))
    perturb(ours)
    write_ours(ours, tmp_path / "ckpt")
    export_checkpoint(tmp_path / "ckpt", tmp_path / "hf", log=lambda _m: None)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    mine = sample(ours, PROMPTS, SamplingParams(temperature=0, max_tokens=NEW))
    for p, o in zip(PROMPTS, mine, strict=True):
        out = hf.generate(torch.tensor([p]), do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW)
        assert out[0, len(p) :].tolist() == o.tokens


def test_tokenizer_travels_with_the_export(tmp_path):
    from transformers import AutoTokenizer

    tok = make_tokenizer(tmp_path / "tokenizer.json")
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(tok)).get_vocab_size()
    torch.manual_seed(0)
    ours = GLMModel(our_config("glm_moe_dsa", vocab_size=vocab, mtp_num_layers=None))
    write_ours(ours, tmp_path / "ckpt")
    step = next((tmp_path / "ckpt").glob("step-*"))
    (step / "tokenizer.json").write_bytes(tok.read_bytes())  # where RL/serving checkpoints keep it
    conf = export_checkpoint(tmp_path / "ckpt", tmp_path / "hf", log=lambda _m: None)
    loaded = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert loaded.convert_tokens_to_ids("<|endoftext|>") in (
        conf["eos_token_id"] if isinstance(conf["eos_token_id"], list) else [conf["eos_token_id"]]
    )
    text = "what is 12 + 7 ?"
    assert loaded(text)["input_ids"] == Tokenizer.from_file(str(tok)).encode(text).ids
