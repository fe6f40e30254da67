import json
import math
import urllib.error
import urllib.request

import pytest

from core.llm import LLMClient, LLMConfig


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_chat_completion_with_real_model(llm_server):
    c = LLMClient(LLMConfig(base_url=llm_server, model="smollm2", cache_dir=None))
    res = c.chat([{"role": "user", "content": "What is the capital of France? Answer in one word."}],
                 max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    assert "Paris" in res.text
    content = res.raw["choices"][0]["logprobs"]["content"]
    assert len(content) >= 1 and len(content[0]["top_logprobs"]) == 3
    top = content[0]["top_logprobs"]
    assert top[0]["logprob"] >= top[1]["logprob"] >= top[2]["logprob"]
    assert content[0]["token"] == top[0]["token"]  # greedy picks the most likely token
    assert res.raw["usage"]["prompt_tokens"] > 5


def test_completion_logprobs_are_a_distribution(llm_server):
    body = post(f"{llm_server}/completions", {"model": "smollm2", "prompt": "1, 2, 3, 4,", "max_tokens": 2,
                                              "temperature": 0, "logprobs": 10})
    lp = body["choices"][0]["logprobs"]
    assert len(lp["top_logprobs"]) == len(lp["tokens"]) == 2 and len(lp["top_logprobs"][0]) == 10
    for tops in lp["top_logprobs"]:
        assert 0.3 < sum(math.exp(v) for v in tops.values()) <= 1.0 + 1e-4
    assert "5" in body["choices"][0]["text"]


def test_sampling_is_seeded_and_stop_works(llm_server):
    req = {"prompt": "Once upon a time", "max_tokens": 10, "temperature": 1.0, "seed": 7}
    a = post(f"{llm_server}/completions", req)["choices"][0]["text"]
    b = post(f"{llm_server}/completions", req)["choices"][0]["text"]
    assert a == b
    s = post(f"{llm_server}/completions", {"prompt": "1, 2, 3,", "max_tokens": 20, "temperature": 0, "stop": ["6"]})
    assert "6" not in s["choices"][0]["text"] and s["choices"][0]["finish_reason"] == "stop"


def test_bad_requests_get_400(llm_server):
    for body in ({"messages": "nope"}, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}):
        with pytest.raises(urllib.error.HTTPError) as err:
            post(f"{llm_server}/chat/completions", body)
        assert err.value.code == 400
    with urllib.request.urlopen(f"{llm_server}/models") as r:
        assert json.loads(r.read())["data"][0]["id"] == "smollm2"
