"""Agents that act in a task environment; each returns the trajectory as an OpenAI-style message list.

- ``oracle``: uploads ``solution/`` to ``/solution`` and runs ``solve.sh`` (``[solution].env``).
- ``nop``: does nothing (a task whose tests pass untouched is broken).
- ``stub``: creates every file the instruction names, empty (tests it passes are trivially satisfiable).
- ``llm``: a terminal agent over any OpenAI-compatible endpoint. It offers one ``bash`` tool;
  tool calls run in the container and their output comes back as ``tool`` messages. Servers
  without tool calling (e.g. ``core.llm_server``) may answer with fenced ```bash blocks instead,
  which run the same way (their output comes back as a user message). It stops when the model
  issues no command, or after ``max_turns``. The trajectory is the unified message list the RL
  side consumes (``reasoning_content`` kept when the server sends it).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

from core.llm import LLMClient, LLMError
from swe_envs.terminal.config import AgentConfig
from swe_envs.terminal.environment import Environment
from swe_envs.terminal.isolation import INFRA_USER
from swe_envs.terminal.task import Step

BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command in the task's terminal; returns its output and exit code.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
SYSTEM = ("You are working in a Linux terminal to complete a task. Use the bash tool to run commands "
          "(or reply with one ```bash fenced block per turn). When the task is complete, reply without a command.")
FENCE = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.DOTALL)


@dataclass
class AgentRun:
    messages: list[dict] = field(default_factory=list)
    log: str = ""
    error: str = ""
    turns: int = 0


def _call(tc_id: str, command: str) -> dict:
    return {"id": tc_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def run_oracle(env: Environment, step: Step, timeout_s: float, solution_env: dict[str, str]) -> AgentRun:
    run = AgentRun(messages=[{"role": "user", "content": step.instruction}])
    if step.solution_dir is None or not (step.solution_dir / "solve.sh").is_file():
        run.error = f"step {step.name}: no solution/solve.sh"
        return run
    env.exec("rm -rf /solution && mkdir -p /solution", timeout_s=60, user=INFRA_USER)
    env.upload(step.solution_dir, "/solution")
    cmd = "bash /solution/solve.sh"
    res = env.exec(f"{cmd} > /logs/agent/oracle.txt 2>&1; rc=$?; cat /logs/agent/oracle.txt; exit $rc",
                   timeout_s=timeout_s, env=solution_env)
    tc = f"call_{uuid.uuid4().hex[:8]}"
    run.messages += [{"role": "assistant", "content": "", "tool_calls": [_call(tc, cmd)]},
                     {"role": "tool", "tool_call_id": tc, "content": res.output}]
    run.log, run.turns = res.output, 1
    if res.timed_out:
        run.error = f"oracle timed out after {timeout_s:.0f}s"
    return run


def run_nop(env: Environment, step: Step) -> AgentRun:
    return AgentRun(messages=[{"role": "user", "content": step.instruction}])


PATHS = re.compile(r"(?<![\w.])(/(?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,8})\b")


BARE = re.compile(r"(?<![\w./-])([\w-]+\.(?:py|txt|json|csv|sh|c|h|cpp|go|rs|js|ts|java|rb|md|yaml|yml|toml|ini|cfg|log))\b")


def run_stub(env: Environment, step: Step) -> AgentRun:
    """Create every file the instruction names, empty: tests that pass now check existence, not behaviour."""
    paths = {p for p in PATHS.findall(step.instruction) if not p.startswith(("/tests", "/solution", "/logs"))}
    paths = sorted(paths | set(BARE.findall(step.instruction)))  # bare names: relative to the workdir
    run = AgentRun(messages=[{"role": "user", "content": step.instruction}])
    if paths:
        cmd = " && ".join(f"mkdir -p \"$(dirname '{p}')\" && : > '{p}'" for p in paths)
        res = env.exec(cmd, timeout_s=60)
        tc = f"call_{uuid.uuid4().hex[:8]}"
        run.messages += [{"role": "assistant", "content": "", "tool_calls": [_call(tc, cmd)]},
                         {"role": "tool", "tool_call_id": tc, "content": res.output}]
        run.log = cmd
    return run


def _observation(res, limit: int) -> str:
    out = res.output
    if len(out) > limit:
        out = out[: limit // 2] + f"\n[... {len(out) - limit} characters cut ...]\n" + out[-limit // 2:]
    return f"{out}\n[exit code {res.rc}{', timed out' if res.timed_out else ''}]"


def run_llm(env: Environment, step: Step, timeout_s: float, cfg: AgentConfig, history: list[dict] | None = None
            ) -> AgentRun:
    client = LLMClient(cfg.llm)
    msgs = list(history or [{"role": "system", "content": SYSTEM}])
    msgs.append({"role": "user", "content": step.instruction})
    run = AgentRun(messages=msgs)
    import time

    t_end = time.monotonic() + timeout_s
    for turn in range(cfg.max_turns):
        if time.monotonic() > t_end:
            run.error = f"agent timed out after {timeout_s:.0f}s"
            break
        try:
            resp = client.chat(msgs, tools=[BASH_TOOL], max_tokens=cfg.max_tokens, temperature=cfg.temperature)
        except LLMError as err:
            run.error = f"llm: {err}"
            break
        m = resp.raw["choices"][0].get("message") or {}
        msg = {"role": "assistant", "content": m.get("content") or ""}
        if m.get("reasoning_content"):
            msg["reasoning_content"] = m["reasoning_content"]
        calls = m.get("tool_calls") or []
        if calls:
            msg["tool_calls"] = calls
        msgs.append(msg)
        run.turns = turn + 1
        if calls:
            for c in calls:
                try:
                    command = json.loads(c["function"]["arguments"]).get("command", "")
                except (KeyError, TypeError, json.JSONDecodeError, AttributeError):
                    command = ""
                if not command:
                    obs = "error: the bash tool needs a JSON argument {\"command\": \"...\"}"
                else:
                    res = env.exec(command, timeout_s=min(cfg.command_timeout_s, max(1, t_end - time.monotonic())))
                    obs = _observation(res, cfg.max_observation_chars)
                    run.log += f"$ {command}\n{res.output}\n"
                msgs.append({"role": "tool", "tool_call_id": c.get("id", ""), "content": obs})
            continue
        blocks = FENCE.findall(msg["content"])
        if not blocks:
            break  # the model says it is done
        command = blocks[0].strip()
        res = env.exec(command, timeout_s=min(cfg.command_timeout_s, max(1, t_end - time.monotonic())))
        run.log += f"$ {command}\n{res.output}\n"
        msgs.append({"role": "user", "content": "Output:\n" + _observation(res, cfg.max_observation_chars)})
    else:
        run.error = run.error or f"stopped after max_turns={cfg.max_turns}"
    return run
