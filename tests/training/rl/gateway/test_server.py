"""The agent gateway driven by the real ``openai`` SDK: a tool-calling agent loop against a Harbor task
session on Docker, through the gateway, in front of a rollout server. The sessions it records become
trajectories that the async trainer's batch path trains with an exact ledger."""

from __future__ import annotations

import json

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task
from tests.training.conftest import start_module, stop

pytestmark = pytest.mark.docker
openai = pytest.importorskip("openai")


def agent_loop(base_url: str, session, turns: int, max_tokens: int = 24) -> list[dict]:
    """A minimal mini-SWE-agent-style scaffold on the OpenAI SDK: tool calls run in the environment
    session, a reply without one gets format feedback, submit ends the episode."""
    from swe_envs.sessions.tools import TOOLS

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    msgs: list[dict] = [{"role": "user", "content": session.instruction}]
    for _ in range(turns):
        reply = client.chat.completions.create(model="policy", messages=msgs, tools=TOOLS, max_tokens=max_tokens,
                                               temperature=1.0).choices[0].message
        msgs.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            msgs.append({"role": "user", "content": "Reply with one tool call: bash, str_replace_editor or submit."})
            continue
        done = False
        for tc in reply.tool_calls:
            obs = session.step(tc.function.name, tc.function.arguments)
            msgs.append({"role": "tool", "tool_call_id": tc.id, "content": obs.text})
            done = done or obs.done
        if done:
            break
    return msgs


@pytest.fixture(scope="module")
def harbor(tmp_path_factory):
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.sessions.session import TerminalSession
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.trial import Context

    ensure_docker(BASE)
    root = tmp_path_factory.mktemp("gw-task")
    task = tiny_task(root)
    ctx = Context(TerminalConfig(), log=lambda m: None)
    return lambda: TerminalSession(ctx, task, root / "verifier")


def test_sdk_tool_calls_run_in_a_session_and_are_recorded_token_in_token_out(harbor, rl_assets, tmp_path):
    """A scripted policy behind /generate (the known-good tool sequence as GLM-5 tokens): the SDK
    sees ``tool_calls``, the agent runs them in the task's container, and the recorded trajectory is
    exactly the sampled ids plus the rendered tool results (masked), append-only."""
    from swe_envs.sessions.tools import TOOLS
    from training.policy.codec import Codec
    from training.rl.gateway.server import Gateway, serve
    from training.serving.http_json import call, serve_json

    codec = Codec.load(rl_assets["tokenizer"])
    script = ["<tool_call>bash<arg_key>command</arg_key><arg_value>echo 42 > /app/answer.txt</arg_value>"
              "</tool_call><|observation|>", "<tool_call>submit</tool_call><|observation|>"]
    seen: list[list[int]] = []

    def generate(body):
        seen.append(body["input_ids"])
        ids = codec.encode(script[min(body["input_ids"].count(codec.observation_id), 1)])
        return {"output_ids": ids, "meta_info": {"finish_reason": {"type": "stop"}, "weight_version": 3,
                                                 "output_token_logprobs": [[-0.25, t, None] for t in ids]}}

    policy = serve_json({"GET /health": lambda b: {"status": "ok"}, "POST /generate": generate})
    gw = Gateway([f"http://127.0.0.1:{policy.server_address[1]}"], codec, out=tmp_path / "gw")
    server = serve(gw)
    session = harbor()
    try:
        opened = call(f"{gw.base}/sessions", {"task": "tiny"})
        msgs = agent_loop(opened["base_url"], session, turns=4)
        reward, _ = session.verify()
        assert reward == 1.0 and [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant", "tool"]
        assert msgs[1]["tool_calls"][0]["function"]["name"] == "bash" and "[exit code 0]" in msgs[2]["content"]
        done = call(f"{gw.base}/sessions/{opened['session_id']}/finish", {"reward": reward})
        (traj,) = done["trajectories"]
        t1, t2 = (codec.encode(s) for s in script)
        n_obs = len(traj["output_ids"]) - len(t1) - len(t2)
        assert traj["loss_mask"] == [1] * len(t1) + [0] * n_obs + [1] * len(t2) and n_obs > 0
        assert traj["token_versions"][: len(t1)] == [3] * len(t1) and traj["reward"] == 1.0
        # the second call was generated from the recorded context: the sampled ids, then the tool result
        assert seen[1] == traj["prompt_ids"] + traj["output_ids"][: len(t1) + n_obs]
        assert seen[1] == codec.chat_prompt(msgs[:3], tools=TOOLS)  # what the template renders, append-only
        rows = [json.loads(x) for x in (tmp_path / "gw" / "trajectories.jsonl").read_text().splitlines()]
        assert [r["id"] for r in rows] == [traj["id"]]
    finally:
        session.close()
        for srv in (server, policy):
            srv.shutdown()
            srv.server_close()


def test_sdk_agent_on_the_tiny_model_trains_through_the_async_batch_path(harbor, rl_assets, tmp_path):
    """The real tiny model behind a real rollout server (`training.rl serve`), the gateway as its CLI,
    two agent sessions of one group; the group goes to the orchestrator's buffer and the async trainer
    trains it: the ledger shows both trajectories trained exactly once."""
    from training.policy.codec import Codec
    from training.rl.rollout.ledger import audit
    from training.rl.rollout.orchestrator import Orchestrator
    from training.rl.trainer.config import RLAsyncConfig
    from training.rl.trainer.process import AsyncTrainer
    from training.rl.trainer.run import initial_checkpoint
    from training.serving.http_json import call

    out = tmp_path / "run"
    out.mkdir()
    (out / "tokenizer.json").write_bytes(rl_assets["tokenizer"].read_bytes())
    cfg = RLAsyncConfig.model_validate({
        "init_checkpoint": str(rl_assets["ckpt"]), "tokenizer": str(rl_assets["tokenizer"]),
        "trainer": {"updates": 1, "batch_groups": 1, "push_every": 1, "batch_timeout_s": 120},
        "orchestrator": {"group_size": 2, "min_group_size": 2, "rollout": {"replicas": 0}}})
    codec = Codec.load(rl_assets["tokenizer"])
    ckpt = initial_checkpoint(cfg, out, codec.vocab_size)
    rollout, url = start_module(["training.rl", "serve", "--checkpoint", str(ckpt)], tmp_path / "rport")
    served = cfg.orchestrator.rollout.model_copy(update={"endpoints": [url]})  # external: registered, pushed to
    cfg.orchestrator = cfg.orchestrator.model_copy(update={"checkpoint": str(ckpt), "rollout": served})
    orch = Orchestrator(cfg.orchestrator, out, codec, log=lambda m: None, wait_for_trainer=True)
    orch.start()
    gateway, gw = start_module(["training.rl", "gateway", "--upstream", url, "--orchestrator", orch.url,
                                "--out", str(tmp_path / "gw")], tmp_path / "gport")
    try:
        for _ in range(2):
            opened = call(f"{gw}/sessions", {"task": "tiny", "group": "g1", "group_size": 2})
            session = harbor()
            try:
                agent_loop(opened["base_url"], session, turns=3)
                reward, _ = session.verify()
            finally:
                session.close()
            done = call(f"{gw}/sessions/{opened['session_id']}/finish", {"reward": reward}, 120)
            assert all(len(t["turns"]) >= 1 and sum(t["loss_mask"]) == sum(map(len, t["turns"]))
                       for t in done["trajectories"])
        assert done["submitted"]["issued"] >= 2  # the whole group, once its second session finished
        AsyncTrainer(cfg, out, orch.url, log=lambda m: None).run()
    finally:
        orch.shutdown()
        stop(gateway)
        stop(rollout)
    led = audit(out)
    assert led["ok"] and led["trained"] == led["issued"] >= 2 and led["dropped"] == 0, led
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["update"] == 1 and metrics[-1]["reward_by_task"] == {"tiny": 0.0}
