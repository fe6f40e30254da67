"""The gateway in front of a rollout server that serves a Hugging Face model (a tiny random Llama made
by transformers with the real SmolLM2 tokenizer and template): the gateway takes the model's own
tokenizer files from the server (``GET /tokenizer``), the real ``openai`` SDK runs a tool loop, the
reply's ``<tool_call>`` JSON comes back as ``tool_calls``, and a session is recorded token-in/token-out
with the tool results appended in the model's template, masked from the loss."""

from __future__ import annotations

import pytest

from tests.training.conftest import start_module, stop

openai = pytest.importorskip("openai")

CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls /app"}}\n</tool_call><|im_end|>'


def test_an_hf_model_behind_the_gateway_records_an_append_only_session(tiny_hf, tmp_path):
    from swe_envs.sessions.tools import TOOLS
    from training.policy.hf import HFCodec
    from training.rl.gateway.server import Gateway, serve, upstream_codec
    from training.serving.http_json import call, serve_json

    rollout, url = start_module(["training.rl", "serve", "--checkpoint", str(tiny_hf)], tmp_path / "rport", 120)
    try:
        codec = upstream_codec(url, None)  # the model's own tokenizer files, from the server
        assert isinstance(codec, HFCodec) and codec.stop_ids == HFCodec.load(tiny_hf).stop_ids
        msgs = [{"role": "user", "content": "What is in /app?"}]
        assert codec.chat_prompt(msgs, tools=TOOLS) == HFCodec.load(tiny_hf).chat_prompt(msgs, tools=TOOLS)
    finally:
        stop(rollout)

    # the policy: turn 1 calls bash, turn 2 answers (a script behind /generate, so the calls are known)
    replies = [codec.encode(CALL), codec.encode("It holds answer.txt.<|im_end|>")]
    seen: list[list[int]] = []

    def generate(body):
        seen.append(body["input_ids"])
        ids = replies[min(len(seen) - 1, 1)]
        return {"output_ids": ids, "meta_info": {"finish_reason": {"type": "stop"}, "weight_version": 1,
                                                 "output_token_logprobs": [[-0.5, t, None] for t in ids]}}

    policy = serve_json({"GET /health": lambda b: {"status": "ok"}, "POST /generate": generate})
    gw = Gateway([f"http://127.0.0.1:{policy.server_address[1]}"], codec, out=tmp_path / "gw")
    server = serve(gw)
    try:
        opened = call(f"{gw.base}/sessions", {"task": "t"})
        client = openai.OpenAI(base_url=opened["base_url"], api_key="unused", max_retries=0)
        first = client.chat.completions.create(model="policy", messages=msgs, tools=TOOLS).choices[0]
        assert first.finish_reason == "tool_calls" and first.message.tool_calls[0].function.name == "bash"
        msgs += [first.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": first.message.tool_calls[0].id, "content": "answer.txt"}]
        second = client.chat.completions.create(model="policy", messages=msgs, tools=TOOLS).choices[0]
        assert second.message.content == "It holds answer.txt." and not second.message.tool_calls
        (traj,) = call(f"{gw.base}/sessions/{opened['session_id']}/finish", {"reward": 1.0})["trajectories"]
    finally:
        for srv in (server, policy):
            srv.shutdown()
            srv.server_close()
    t1, t2 = replies
    n_obs = len(traj["output_ids"]) - len(t1) - len(t2)
    assert n_obs > 0 and traj["loss_mask"] == [1] * len(t1) + [0] * n_obs + [1] * len(t2)
    # the second call's context: what the model sampled, then the tool turn as SmolLM2's template writes it
    assert seen[1] == traj["prompt_ids"] + t1 + traj["output_ids"][len(t1) : len(t1) + n_obs]
    obs = codec.decode(traj["output_ids"][len(t1) : len(t1) + n_obs], skip_special=False)
    assert obs == "\n<|im_start|>tool\nanswer.txt<|im_end|>\n<|im_start|>assistant\n"
