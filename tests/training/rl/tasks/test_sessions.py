"""Multi-turn session tasks on a real Docker engine (the tiny Harbor task FROM the offline Debian base):
the backend runs tool calls in a session and grades with the task's verifier, and the orchestrator drives
an episode turn by turn — tool calls parsed from the policy's GLM-5 tokens, observations rendered back as
masked context, the reward from the session's verify, every container closed."""

from __future__ import annotations

import json

import pytest

from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker


def _owned_containers() -> list:
    from swe_envs.docker_setup import docker_client
    from swe_envs.sandbox import LABEL, owner

    return docker_client().containers.list(all=True, filters={"label": f"{LABEL}={owner()}"})


def _bash(command: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


SUBMIT = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "submit",
                                                                                               "arguments": "{}"}}]}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    from swe_envs.docker_setup import ensure_docker

    ensure_docker(BASE)
    root = tmp_path_factory.mktemp("session-tasks")
    tiny_task(root / "tasks")
    return root


def test_backend_steps_in_a_session_and_grades_with_its_verifier(tasks):
    from training.rl.tasks.sessions import SessionLost, terminal_sessions

    backend = terminal_sessions(str(tasks / "tasks"), out=str(tasks / "out"), max_turns=5)
    try:
        inst = backend.instance(0)
        assert inst["session"] and inst["max_turns"] == 5 and "42" in inst["messages"][0]["content"]
        assert {t["function"]["name"] for t in inst["tools"]} == {"bash", "str_replace_editor", "submit"}
        msgs = inst["messages"] + [_bash("echo 42 > /app/answer.txt; cat /app/answer.txt")]
        obs = backend.step(inst, [], msgs, "e1")
        assert len(obs) == 1 and obs[0]["role"] == "tool"
        assert obs[0]["content"].startswith("42\n") and obs[0]["content"].endswith("[exit code 0]")
        no_call = backend.step(inst, [], msgs + obs + [{"role": "assistant", "content": "hmm"}], "e1")
        assert "no tool call" in no_call[0]["content"]  # feedback, not the end of the episode
        assert backend.step(inst, [], msgs + obs + [SUBMIT], "e1") is None  # submit ends it
        reward, info = backend.reward(inst, msgs + obs + [SUBMIT], None, "e1")
        assert reward == 1.0 and info["ended"] == "submit" and info["tool_calls"] == 2
        assert info["episode_s"] >= info["verify_s"] >= 0  # the episode's environment time holds its verify
        assert backend.reward(inst, msgs, None, "e1") == (reward, info)  # a retried /reward: the same answer
        # an episode that answered without a tool call is graded on the untouched environment
        assert backend.reward(inst, inst["messages"] + [{"role": "assistant", "content": "42"}], None, "e2")[0] == 0.0
        wrong = inst["messages"] + [_bash("echo 41 > /app/answer.txt")]
        backend.step(inst, [], wrong, "e3")
        assert backend.close("e3") and not backend.close("e3")
        with pytest.raises(SessionLost):  # its session is gone: the orchestrator starts the episode over
            backend.step(inst, [], wrong + [{"role": "tool", "content": "x"}, SUBMIT], "e3")
        backend.wall_s = 0.0  # the wall-clock budget spent: the next step ends the episode, graded as it stands
        assert backend.step(inst, [], msgs, "e4") is None
        assert backend.reward(inst, msgs + [{"role": "tool", "content": "x"}], None, "e4")[1]["ended"] == "wall_clock"
        assert backend.pool.sessions == {}
    finally:
        backend.shutdown()
    assert _owned_containers() == []


def scripted_rollout(kind: str, args: dict, script: list[str], rl_assets, tmp_path, codec=None,
                     turn=None, **extra) -> tuple[dict, dict]:
    """One group from the orchestrator on a session task whose policy is a script behind SGLang's
    /generate (the known-good tool sequence as GLM-5 tokens, or as ``codec``'s where ``turn(input_ids)``
    says which turn is asked for; turn k = the k-th reply); (group, summary)."""
    from training.policy.codec import Codec
    from training.rl.rollout.config import OrchestratorConfig
    from training.rl.rollout.orchestrator import Orchestrator
    from training.rl.tasks.service import TaskService
    from training.serving.http_json import serve_json

    codec = codec or Codec.load(rl_assets["tokenizer"])
    turn = turn or (lambda ids: ids.count(codec.observation_id))

    def generate(body):
        ids = codec.encode(script[min(turn(body["input_ids"]), len(script) - 1)])
        return {"output_ids": ids, "meta_info": {"finish_reason": {"type": "stop"}, "weight_version": 0,
                                                 "output_token_logprobs": [[-0.5, t, None] for t in ids]}}

    policy = serve_json({"GET /health": lambda b: {"status": "ok"}, "POST /generate": generate})
    svc = TaskService(kind, kind, dict(args, out=str(tmp_path / "svc")))
    svc.load()
    assert svc.error is None, svc.error
    service = serve_json(svc.routes())
    cfg = OrchestratorConfig.model_validate({
        "tokenizer": str(rl_assets["tokenizer"]), "group_size": 2, "max_ahead_groups": 1, "workers": 2,
        "request_timeout_s": 1800, "sampling": {"max_tokens": 4096},
        "rollout": {"backend": "sglang", "replicas": 0, "endpoints": [f"http://127.0.0.1:{policy.server_address[1]}"]},
        "heartbeat": {"interval_s": 0.2, "timeout_s": 30},
        "tasks": [{"name": kind, "kind": kind, "replicas": 0,
                   "endpoints": [f"http://127.0.0.1:{service.server_address[1]}"]}], **extra})
    orch = Orchestrator(cfg, tmp_path / "out", codec, log=lambda m: None)
    orch.start()
    try:
        assert orch.wait_ready(60)
        group = orch.take_batch(1, 2400)["groups"][0]
    finally:
        summary = orch.shutdown()
        for srv in (policy, service):
            srv.shutdown()
            srv.server_close()
        svc.shutdown()
    return group, summary


def test_orchestrator_runs_a_multi_turn_episode_in_a_session(tasks, rl_assets, tmp_path):
    """The bash call runs in the task's container, its output comes back as observation tokens in
    context, submit ends the episode, and the verifier's reward is 1."""
    from swe_envs.sessions.tools import TOOLS
    from training.policy.codec import Codec

    codec = Codec.load(rl_assets["tokenizer"])
    script = ["<tool_call>bash<arg_key>command</arg_key><arg_value>echo 42 > /app/answer.txt</arg_value>"
              "</tool_call><|observation|>", "<tool_call>submit</tool_call><|observation|>"]
    group, summary = scripted_rollout("terminal", {"tasks": str(tasks / "tasks")}, script, rl_assets, tmp_path)
    for traj in group["trajectories"]:
        assert traj["reward"] == 1.0 and traj["reward_info"]["ended"] == "submit"
        roles = [m["role"] for m in traj["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert traj["messages"][1]["tool_calls"][0]["function"]["name"] == "bash"
        assert "[exit code 0]" in traj["messages"][2]["content"]
        t1, t2 = (codec.encode(s) for s in script)
        n_obs = len(traj["output_ids"]) - len(t1) - len(t2)
        assert traj["loss_mask"] == [1] * len(t1) + [0] * n_obs + [1] * len(t2)  # observations: context only
        assert traj["logprobs"][len(t1):len(t1) + n_obs] == [0.0] * n_obs
        # token-in/token-out and append-only: the sampled context is what the template renders
        upto = len(traj["prompt_ids"]) + len(t1) + n_obs
        assert (traj["prompt_ids"] + traj["output_ids"])[:upto] == codec.chat_prompt(traj["messages"][:3],
                                                                                     tools=TOOLS)
    assert summary["ledger"]["open"] == 0
    assert _owned_containers() == []


def test_a_hugging_face_template_runs_the_same_episode(tasks, rl_assets, hf_tok, tmp_path):
    """The same episode with a Hugging Face model's own template (SmolLM2's, which renders no tools:
    they come in the system message): a JSON tool call in ``<tool_call>`` tags, then one as the JSON
    line SFT trains on, each ending the turn with ``<|im_end|>``; the tool results appended as the
    template renders them; the reward 1."""
    from swe_envs.sessions.tools import TOOLS
    from training.policy import hf_chat
    from training.policy.hf import HFCodec

    end = "<|im_end|>"
    codec = HFCodec(hf_tok, [hf_tok.convert_tokens_to_ids(end)])
    start = hf_tok.convert_tokens_to_ids("<|im_start|>")
    prompt_starts = 3  # system (the tools), user, the generation prompt; each turn adds a tool turn and a prompt
    script = ['<tool_call>\n{"name": "bash", "arguments": {"command": "echo 42 > /app/answer.txt"}}\n</tool_call>' + end,
              '{"name": "submit", "arguments": {}}' + end]
    group, summary = scripted_rollout("terminal", {"tasks": str(tasks / "tasks")}, script, rl_assets, tmp_path,
                                      codec=codec, turn=lambda ids: (ids.count(start) - prompt_starts) // 2,
                                      save_rollouts=True)
    for traj in group["trajectories"]:
        assert traj["reward"] == 1.0 and traj["reward_info"]["ended"] == "submit"
        assert [m["role"] for m in traj["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert json.loads(traj["messages"][1]["tool_calls"][0]["function"]["arguments"])["command"].startswith("echo 42")
        t1, t2 = (codec.encode(s) for s in script)
        n_obs = len(traj["output_ids"]) - len(t1) - len(t2)
        assert n_obs > 0 and traj["loss_mask"] == [1] * len(t1) + [0] * n_obs + [1] * len(t2)
        whole = hf_chat.fold_for_template(traj["messages"][:1], TOOLS, hf_tok.chat_template) + [
            {"role": "assistant", "content": script[0][: -len(end)]}, traj["messages"][2]]
        assert traj["prompt_ids"] + traj["output_ids"][: len(t1) + n_obs] == codec.encode(
            hf_tok.apply_chat_template(whole, tokenize=False, add_generation_prompt=True))
    # save_rollouts: the group as Trajectory payloads, which export-sft turns into SFT rows
    from training.rl.export import sft_row

    saved = [json.loads(x) for x in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()]
    assert saved == group["trajectories"]
    rows = [sft_row(r, TOOLS) for r in saved]
    assert all(r and r["messages"][1]["tool_calls"][0]["function"]["name"] == "bash" for r in rows)
    assert summary["ledger"]["open"] == 0
    assert _owned_containers() == []


@pytest.mark.slow
def test_orchestrator_gold_tool_sequence_resolves_a_real_swe_instance(rl_assets, tmp_path):
    """The gold patch of a real SWE instance (samples' calc repository: FAIL_TO_PASS and PASS_TO_PASS
    from its own tests) written with the editor and applied through bash, turn by turn through the
    orchestrator: the session's verify resolves it (reward 1). Builds its environment on a cold cache."""
    from samples.agentic import build_agentic

    paths = build_agentic(tmp_path / "agentic")
    inst = json.loads(paths["swe_instances"].read_text().splitlines()[0])
    args = {"instances": str(paths["swe_instances"]), "repos": str(paths["swe_repos"])}
    script = ["<tool_call>str_replace_editor<arg_key>command</arg_key><arg_value>create</arg_value><arg_key>path"
              f"</arg_key><arg_value>/tmp/gold.diff</arg_value><arg_key>file_text</arg_key><arg_value>{inst['patch']}"
              "</arg_value></tool_call><|observation|>",
              "<tool_call>bash<arg_key>command</arg_key><arg_value>git apply /tmp/gold.diff</arg_value></tool_call>"
              "<|observation|>", "<tool_call>submit</tool_call><|observation|>"]
    group, summary = scripted_rollout("swe", args, script, rl_assets, tmp_path)
    for traj in group["trajectories"]:
        assert traj["reward"] == 1.0 and traj["reward_info"]["steps"][0]["status"] == "resolved", traj["reward_info"]
        assert [m["role"] for m in traj["messages"]] == ["user"] + ["assistant", "tool"] * 2 + ["assistant"]
    assert summary["ledger"]["open"] == 0
    assert _owned_containers() == []
