"""The rollout server as a real process on 127.0.0.1 over a tiny checkpoint."""

from __future__ import annotations

import base64
import threading

import pytest
from safetensors.torch import load_file, save

from tests.training.conftest import start_module, stop
from training.policy.codec import Codec
from training.serving import rollout_client
from training.serving.http_json import CallFailure, call


@pytest.fixture(scope="module")
def server(rl_assets, tmp_path_factory):
    port_file = tmp_path_factory.mktemp("serve") / "port"
    proc, url = start_module(["training.rl", "serve", "--checkpoint", str(rl_assets["ckpt"]),
                              "--chunk-tokens", "4"], port_file)
    yield url
    stop(proc)


def test_generate_token_in_out(server, rl_assets):
    codec = Codec.load(rl_assets["tokenizer"])
    ids = codec.chat_prompt([{"role": "user", "content": "what is 2 + 3 ?"}])
    res = call(f"{server}/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 9, "temperature": 1.0},
                                      "rid": "a"})
    meta = res["meta_info"]
    assert len(res["output_ids"]) == len(meta["output_token_logprobs"]) == meta["completion_tokens"]
    assert meta["finish_reason"]["type"] in ("stop", "length")
    assert len(res["output_ids"]) == 9 or res["output_ids"][-1] in codec.stop_ids
    assert all(lp <= 0 for lp, _, _ in meta["output_token_logprobs"])
    assert meta["weight_version"] == 0 and set(meta["token_weight_versions"]) == {0}
    # greedy is deterministic across chunk boundaries (each chunk re-reads the tokens so far)
    greedy = {"max_new_tokens": 9, "temperature": 0.0, "stop_token_ids": [-1]}
    a = rollout_client.generate(server, "ours", ids, {"max_tokens": 9, "temperature": 0.0, "top_p": 1.0}, "g1", 30)
    b = call(f"{server}/generate", {"input_ids": ids, "sampling_params": greedy})
    assert a.output_ids == b["output_ids"] and len(a.output_ids) == 9
    # the client's vLLM path (/v1/completions, token ids in and out) reads the same tokens here
    v = rollout_client.generate(server, "vllm", ids, {"max_tokens": 9, "temperature": 0.0, "top_p": 1.0,
                                                      "stop_token_ids": [-1]}, "v1", 30, weight_version=3)
    assert v.output_ids == a.output_ids and v.versions == [3] * 9
    assert [round(x, 4) for x in v.logprobs] == [round(x, 4) for x in a.logprobs]


def test_openai_routes(server):
    comp = call(f"{server}/v1/completions", {"prompt": "sort 3 1 2", "max_tokens": 5, "logprobs": 0,
                                             "temperature": 0})
    lp = comp["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == comp["usage"]["completion_tokens"] == 5
    chat = call(f"{server}/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 6, "logprobs": True})
    choice = chat["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert len(choice["logprobs"]["content"]) == chat["usage"]["completion_tokens"]
    tool = {"type": "function", "function": {"name": "bash", "description": "run a command",
                                             "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}
    with_tools = call(f"{server}/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                        "tools": [tool], "max_tokens": 1})
    assert with_tools["usage"]["prompt_tokens"] > chat["usage"]["prompt_tokens"] + 10  # the tools are in the prompt
    group = call(f"{server}/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 3,
                                                   "max_tokens": 4, "logprobs": True})
    assert [c["index"] for c in group["choices"]] == [0, 1, 2]
    assert group["usage"]["completion_tokens"] == sum(len(c["logprobs"]["content"]) for c in group["choices"])
    for body in ({"n": 0}, {"stop": ["\n"]}, {"stream": True}):  # refused, never silently ignored
        bad = call(f"{server}/v1/completions", {"prompt": "sort", "max_tokens": 2, **body})
        assert isinstance(bad, CallFailure) and bad.kind == "http_400"
    bad = call(f"{server}/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]})
    assert isinstance(bad, CallFailure) and bad.kind == "http_400"
    bad = call(f"{server}/generate", {"input_ids": [10**9]})
    assert isinstance(bad, CallFailure) and bad.kind == "http_400" and "token ids in [0," in bad.message
    assert call(f"{server}/health", None)["status"] == "ok"


def test_update_weights_path_and_tensors_and_abort(server, rl_assets):
    ids = [5, 6, 7]
    greedy = {"max_new_tokens": 6, "temperature": 0.0}
    before = call(f"{server}/generate", {"input_ids": ids, "sampling_params": greedy})["output_ids"]
    res = call(f"{server}/update_weights", {"model_path": str(rl_assets["ckpt2"]), "weight_version": 5})
    assert res == {"success": True, "weight_version": 5}
    after = call(f"{server}/generate", {"input_ids": ids, "sampling_params": greedy})
    assert after["meta_info"]["weight_version"] == 5 and after["output_ids"] != before
    # pushed tensors: the original weights again, as safetensors bytes
    blob = base64.b64encode(save(load_file(rl_assets["ckpt"] / "model.safetensors"))).decode()
    assert call(f"{server}/update_weights", {"tensors_b64": blob, "weight_version": 6})["weight_version"] == 6
    again = call(f"{server}/generate", {"input_ids": ids, "sampling_params": greedy})["output_ids"]
    assert again == before
    wrong = call(f"{server}/update_weights", {"tensors_b64": base64.b64encode(b"junk").decode(), "weight_version": 7})
    assert isinstance(wrong, CallFailure) and wrong.kind == "http_400"
    # the client's SGLang path (update_weights_from_disk, /generate) against our server's aliases
    assert rollout_client.update_weights(server, "sglang", str(rl_assets["ckpt"]), 8, False)["weight_version"] == 8
    gen = rollout_client.generate(server, "sglang", ids, {"max_tokens": 3, "temperature": 0.0, "top_p": 1.0}, "s", 30)
    assert gen.output_ids == before[:3] and gen.versions == [8] * len(gen.output_ids)
    # abort: a long request ends early with finish_reason abort and what it had
    out = {}
    th = threading.Thread(target=lambda: out.update(call(f"{server}/generate", {
        "input_ids": ids, "rid": "long", "sampling_params": {"max_new_tokens": 400, "stop_token_ids": [-1]}})))
    th.start()
    import time

    deadline = time.monotonic() + 120
    while call(f"{server}/health", None)["inflight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert call(f"{server}/abort_request", {"rid": "long"})["aborted"] == 1
    th.join(300)
    assert out["meta_info"]["finish_reason"]["type"] == "abort" and len(out["output_ids"]) < 400


def _in_flight(server, body):
    """A request running in the engine with at least one chunk sampled (counters are cumulative
    across tests, so progress is measured from here; polling, no fixed sleeps: a loaded machine)."""
    import time

    base = call(f"{server}/stats", None)["tokens"]
    out = {}
    th = threading.Thread(target=lambda: out.update(call(f"{server}/generate", body, timeout_s=300)))
    th.start()
    deadline = time.monotonic() + 120
    while not (call(f"{server}/health", None)["inflight"] and call(f"{server}/stats", None)["tokens"] > base):
        assert time.monotonic() < deadline and th.is_alive(), "the request never started"
        time.sleep(0.02)
    return th, out


def test_partial_rollout_and_abort_on_push(server, rl_assets):
    """A push mid-request: the request finishes on the new weights, each token tagged with the
    version that sampled it; with abort_all_requests it ends as abort instead."""
    body = {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 120, "stop_token_ids": [-1]}}
    th, out = _in_flight(server, body)
    assert call(f"{server}/update_weights", {"model_path": str(rl_assets["ckpt2"]), "weight_version": 11})["success"]
    th.join(300)
    versions = out["meta_info"]["token_weight_versions"]
    assert len(out["output_ids"]) == 120 and versions == sorted(versions)
    assert versions[-1] == 11 and versions[0] != 11
    th, out = _in_flight(server, body)
    res = call(f"{server}/update_weights", {"model_path": str(rl_assets["ckpt"]), "weight_version": 12,
                                            "abort_all_requests": True})
    th.join(300)
    assert res["success"] and out["meta_info"]["finish_reason"]["type"] == "abort"
