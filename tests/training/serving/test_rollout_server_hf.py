"""The rollout server over a transformers model directory (a tiny random Llama made by transformers,
the SmolLM2 tokenizer and chat template): the same routes as over ours, weight pushes included."""

from __future__ import annotations

import pytest

from tests.training.conftest import ok, start_module, stop
from training.serving.http_json import call


@pytest.fixture(scope="module")
def hf_server(tiny_hf, tmp_path_factory):
    port_file = tmp_path_factory.mktemp("serve_hf") / "port"
    # importing transformers and loading the model takes a while on a loaded machine
    proc, url = start_module(["training.rl", "serve", "--checkpoint", str(tiny_hf), "--chunk-tokens", "3"], port_file,
                             timeout_s=300)
    yield url
    stop(proc)


def test_generate_chat_and_weight_push(hf_server, tiny_hf, hf_tok, tmp_path):
    import torch

    from training.policy import load_policy

    ids = hf_tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True,
                                     tokenize=False)
    ids = hf_tok.encode(ids, add_special_tokens=False)
    greedy = {"max_new_tokens": 7, "temperature": 0.0, "stop_token_ids": [-1]}
    a = ok(call(f"{hf_server}/generate", {"input_ids": ids, "sampling_params": greedy}))
    assert len(a["output_ids"]) == 7 == len(a["meta_info"]["output_token_logprobs"])  # 7 tokens over 3 chunks
    chat = ok(call(f"{hf_server}/v1/chat/completions", {"messages": [{"role": "user", "content": "What is 2 + 3?"}],
                                                        "max_tokens": 7, "temperature": 0.0, "logprobs": True}))
    assert chat["choices"][0]["message"]["role"] == "assistant" and chat["usage"]["prompt_tokens"] == len(ids)
    # push other weights (an HF policy checkpoint: the tied embedding written once) as version 1
    policy = load_policy(tiny_hf)
    with torch.no_grad():
        for p in policy.module.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    step = policy.save(tmp_path / "ckpt", 1, None, {})
    ok(call(f"{hf_server}/update_weights", {"model_path": str(step), "weight_version": 1}))
    b = ok(call(f"{hf_server}/generate", {"input_ids": ids, "sampling_params": greedy}))
    assert b["meta_info"]["weight_version"] == 1 and b["output_ids"] != a["output_ids"]
    bad = call(f"{hf_server}/update_weights", {"tensors_b64": "bm90", "weight_version": 2})
    assert getattr(bad, "kind", None) == "http_400"
