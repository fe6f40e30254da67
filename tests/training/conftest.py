"""Shared pieces for the RL and rollout-server tests: a small real BPE tokenizer (with the GLM-5 special
tokens), a tiny GLM-5-shaped checkpoint in the trainer's layout, and process helpers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from training.serving.http_json import CallFailure, call

TEXT = ["what is 12 + 7 ? answer: 19", "sort 3 1 2 -> 1 2 3", "copy abc -> abc", "the quick brown fox"]


def make_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from training.chat_template import add_special_tokens

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT * 10, trainer)
    add_special_tokens(tok).save(str(path))
    return path


def make_checkpoint(root: Path, tokenizer: Path, seed: int = 0, version: int = 0) -> Path:
    from tests.training.glm_tiny import tiny_model
    from training.checkpoint import save_checkpoint
    from training.model.glm import GLMModel
    from training.policy.codec import Codec

    vocab = Codec.load(tokenizer).vocab_size
    torch.manual_seed(seed)
    cfg = tiny_model(vocab_size=vocab, mtp_num_layers=0)
    model = GLMModel(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    path = save_checkpoint(root, version, model, opt,
                           {"weight_version": version, "config": {"model": cfg.model_dump(mode="json")}})
    (path / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    return path


@pytest.fixture(scope="session")
def hf_tok():
    """The real SmolLM2 tokenizer with its chat template (from the cache, core.local_lm)."""
    from transformers import AutoTokenizer

    from core.local_lm import obtain_smollm2

    return AutoTokenizer.from_pretrained(str(obtain_smollm2(log=lambda _m: None)))


def make_tiny_hf(out: Path, tok, seed: int = 0) -> Path:
    """A tiny random LlamaForCausalLM made by transformers itself, with ``tok`` saved beside it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def tiny_hf(hf_tok, tmp_path_factory) -> Path:
    return make_tiny_hf(tmp_path_factory.mktemp("tiny_hf"), hf_tok)


@pytest.fixture(scope="session")
def rl_assets(tmp_path_factory):
    d = tmp_path_factory.mktemp("rl_assets")
    tok = make_tokenizer(d / "tokenizer.json")
    return {"tokenizer": tok, "ckpt": make_checkpoint(d / "ckpt", tok, seed=0),
            "ckpt2": make_checkpoint(d / "ckpt2", tok, seed=1, version=5)}


def wait_port_file(proc: subprocess.Popen, port_file: Path, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_file.is_file() and port_file.read_text().strip():
            return int(port_file.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError("process did not start in time")


def start_module(args: list[str], port_file: Path, timeout_s: float = 60.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", *args, "--port", "0", "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = wait_port_file(proc, port_file, timeout_s)
    return proc, f"http://127.0.0.1:{port}"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ok(res):
    assert not isinstance(res, CallFailure), str(res)
    return res


__all__ = ["call", "ok"]
