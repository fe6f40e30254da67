"""``stream: true`` through the gateway, read by the real ``openai`` SDK: the chunks it accumulates
are the reply a non-streamed call gets (reasoning, content, logprobs, tool calls, finish reason,
usage), and a streamed call is recorded token-in/token-out like any other."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")

# one reply with everything a chunk can carry: reasoning, content and two tool calls
REPLY = ("look first</think>Listing the files."  # thinking on: the prompt ends in <think>
         "<tool_call>bash<arg_key>command</arg_key><arg_value>ls /app</arg_value></tool_call>"
         "<tool_call>submit</tool_call><|observation|>")


@pytest.fixture()
def gateway(rl_assets, tmp_path):
    from training.policy.codec import Codec
    from training.rl.gateway.server import Gateway, serve
    from training.serving.http_json import serve_json

    codec = Codec.load(rl_assets["tokenizer"])
    ids = codec.encode(REPLY)

    def generate(body):
        return {"output_ids": ids, "meta_info": {"finish_reason": {"type": "stop"}, "weight_version": 7,
                                                 "output_token_logprobs": [[-0.5, t, None] for t in ids]}}

    policy = serve_json({"GET /health": lambda b: {"status": "ok"}, "POST /generate": generate})
    gw = Gateway([f"http://127.0.0.1:{policy.server_address[1]}"], codec, out=tmp_path / "gw", thinking=True)
    server = serve(gw)
    yield gw, codec, ids
    for srv in (server, policy):
        srv.shutdown()
        srv.server_close()


def _client(gw):
    from training.serving.http_json import call

    opened = call(f"{gw.base}/sessions", {"task": "t"})
    return opened["session_id"], openai.OpenAI(base_url=opened["base_url"], api_key="unused", max_retries=0)


def test_streamed_chunks_accumulate_to_the_non_streamed_reply(gateway):
    from swe_envs.sessions.tools import TOOLS

    gw, codec, ids = gateway
    msgs = [{"role": "user", "content": "what is in /app?"}]
    _, client = _client(gw)
    whole = client.chat.completions.create(model="policy", messages=msgs, tools=TOOLS, logprobs=True)
    _, client = _client(gw)
    stream = client.chat.completions.create(model="policy", messages=msgs, tools=TOOLS, logprobs=True, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text, reasoning, calls, logprobs, finish = "", "", {}, [], None
    for c in chunks[:-1]:
        (ch,) = c.choices
        d = ch.delta
        text += d.content or ""
        reasoning += (d.model_extra or {}).get("reasoning_content") or ""
        for tc in d.tool_calls or []:  # OpenAI's accumulation rule: by index, arguments concatenated
            acc = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
            acc["name"] += tc.function.name or ""
            acc["arguments"] += tc.function.arguments or ""
        logprobs += ch.logprobs.content if ch.logprobs and ch.logprobs.content else []
        finish = ch.finish_reason or finish
    msg = whole.choices[0].message
    assert text == msg.content == "Listing the files." and reasoning == msg.model_extra["reasoning_content"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == [("bash", {"command": "ls /app"}), ("submit", {})]
    assert all(c["id"].startswith("call_") for c in calls.values())
    assert finish == whole.choices[0].finish_reason == "tool_calls"
    assert [lp.logprob for lp in logprobs] == [-0.5] * len(ids)
    assert not chunks[-1].choices and chunks[-1].usage.completion_tokens == len(ids) == whole.usage.completion_tokens


def test_the_sdk_stream_helper_reads_it_and_the_call_is_recorded(gateway):
    """``client.chat.completions.stream`` (the SDK's own accumulator) ends with the full message,
    and the session's trajectory holds the sampled ids with their version, as for a plain call."""
    from training.serving.http_json import call

    gw, codec, ids = gateway
    sid, client = _client(gw)
    with client.chat.completions.stream(model="policy", messages=[{"role": "user", "content": "go"}]) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Listing the files." and [t.function.name for t in msg.tool_calls] == ["bash", "submit"]
    (traj,) = call(f"{gw.base}/sessions/{sid}/finish", {"reward": 1.0})["trajectories"]
    assert traj["output_ids"] == ids and traj["token_versions"] == [7] * len(ids) and traj["loss_mask"] == [1] * len(ids)


def test_a_bad_streamed_request_is_refused_before_any_chunk(gateway):
    gw, _, _ = gateway
    _, client = _client(gw)
    with pytest.raises(openai.BadRequestError, match="n must be 1"):
        client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "x"}], n=2, stream=True)
