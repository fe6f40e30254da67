"""``python -m swe_envs session run``: drive a policy through sessions and write its trajectories.

Policies (what acceptance and the RL stack compare against):

- ``gold``: the known-good tool sequence. A SWE instance: the reference patch written with the editor
  tool, then ``git apply`` through bash. A Harbor task: each solution file created with the editor,
  then ``bash /solution/solve.sh`` through bash, step by step.
- ``nop``: submits at once.
- ``scripted:FILE.jsonl``: rows ``{"id", "tool_calls": [{"name", "arguments"}, ...]}`` replayed per
  instance or task id (a recorded agent).

``OUT/trajectories.jsonl``: one row per instance or task: ``id``, ``messages`` (the unified message list:
user instruction, assistant ``tool_calls``, ``tool`` observations), ``reward``, ``turns``, ``verify``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.io import read_jsonl
from swe_envs.sessions.hosts import Host
from swe_envs.sessions.session import Session, SweSession, TerminalSession

Call = tuple[str, dict[str, Any]]
Opener = Callable[[Host], Session]


def gold_calls_swe(inst: dict[str, Any]) -> list[Call]:
    patch = inst.get("patch") or ""
    return [("str_replace_editor", {"command": "create", "path": "/tmp/gold.diff", "file_text": patch}),
            ("bash", {"command": "git apply --whitespace=nowarn /tmp/gold.diff && git status --short"})]


def gold_calls_terminal(session: TerminalSession) -> list[Call]:
    step = session.task.steps[session.step_index]
    if step.solution_dir is None:
        return []
    calls: list[Call] = []
    for f in sorted(p for p in step.solution_dir.rglob("*") if p.is_file()):
        rel = f.relative_to(step.solution_dir).as_posix()
        calls.append(("str_replace_editor", {"command": "create", "path": f"/solution/{rel}",
                                             "file_text": f.read_text(encoding="utf-8", errors="replace")}))
    env = " ".join(f"{k}={json.dumps(v)}" for k, v in session.task.config.solution.env.items())
    calls.append(("bash", {"command": f"{env + ' ' if env else ''}bash /solution/solve.sh",
                           "timeout": session.task.config.agent.timeout_sec}))
    return calls


def _policy(spec: str) -> Callable[[Session], list[Call]]:
    if spec == "nop":
        return lambda s: []
    if spec == "gold":
        return lambda s: gold_calls_swe(s.inst) if isinstance(s, SweSession) else gold_calls_terminal(s)
    if spec.startswith("scripted:"):
        path = Path(spec.split(":", 1)[1])
        rows = {str(r["id"]): r for r in read_jsonl(path, "scripted policy")}
        return lambda s: [(c["name"], c.get("arguments") or {}) for c in rows.get(s.name, {}).get("tool_calls", [])]
    raise UserError(f"--policy: gold, nop or scripted:FILE.jsonl, not {spec!r}")


def episode(session: Session, calls_for: Callable[[Session], list[Call]]) -> dict[str, Any]:
    """Run the policy's calls, submit, verify (every step of a multi-step task); the trajectory row."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": session.instruction}]
    rewards, verdicts = [], []
    while True:
        for name, args in calls_for(session):
            tc = f"call_{uuid.uuid4().hex[:8]}"
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": tc, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            obs = session.step(name, args)
            messages.append({"role": "tool", "tool_call_id": tc, "content": obs.text})
        tc = f"call_{uuid.uuid4().hex[:8]}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": tc, "type": "function", "function": {"name": "submit", "arguments": "{}"}}]})
        session.step("submit", {})
        reward, verdict = session.verify()
        messages.append({"role": "tool", "tool_call_id": tc, "content": f"reward {reward:g}"})
        rewards.append(reward)
        verdicts.append(verdict)
        if not isinstance(session, TerminalSession) or session.steps_left == 0:
            break
        messages.append({"role": "user", "content": session.instruction})
    return {"id": session.name, "kind": session.kind, "messages": messages, "reward": sum(rewards) / len(rewards),
            "turns": session.turns, "verify": verdicts}


def openers(instances: Path | None, repos: Path | None, tasks: Path | None, out: Path,
            config: Path | None, log: Callable[[str], None] = print) -> tuple[dict[str, Opener], list[str]]:
    """(what can be opened, by task name or instance id, each on a given engine; the input rows that
    were refused, with why). What sessions share on an engine is made there on first use."""
    from core.cli import load_cli_config

    if (instances is None) == (tasks is None):
        raise UserError("give --instances (with --repos) or --tasks")
    if tasks is not None:
        from swe_envs.terminal.config import TerminalConfig
        from swe_envs.terminal.task import load_task
        from swe_envs.terminal.trial import Context

        cfg = load_cli_config(TerminalConfig, config, None)
        dirs = [tasks] if (tasks / "task.toml").is_file() else sorted(p.parent for p in tasks.glob("*/task.toml"))
        if not dirs:
            raise UserError(f"no Harbor task (task.toml) under {tasks}")

        def context(host: Host) -> Context:
            return Context(cfg, log=lambda m: None, client=host.client())

        return {load_task(d).name: (lambda host, d=d: TerminalSession(host.state("terminal", context), d,
                                                                      out / "verifier")) for d in dirs}, []
    from swe_envs.config import SweEnvsConfig
    from swe_envs.envs.environment.group import make_builder
    from swe_envs.envs.evaluate import Evaluator
    from swe_envs.instance import read_instances
    from swe_envs.sessions.verify import SweHost
    from swe_envs.sessions.warm import Verifiers, WarmImages

    rows, bad = read_instances(instances)
    cfg = load_cli_config(SweEnvsConfig, config, None)
    (out / "evaluate").mkdir(parents=True, exist_ok=True)
    repos = repos.absolute() if repos else None

    def harness(host: Host) -> SweHost:
        client = host.client()
        builder = make_builder(client, cfg, out / "evaluate", log)
        return SweHost(Evaluator(cfg, builder, repos, out / "evaluate", log=log), WarmImages(client, log),
                       Verifiers(client, cfg.sandbox, log=log))

    return ({inst["instance_id"]: (lambda host, inst=inst: SweSession(host.state("swe", harness), inst))
             for inst in rows}, [f"{b['instance_id']}: {b['reason']}" for b in bad])


def run(policy: str, out: Path, instances: Path | None = None, repos: Path | None = None, tasks: Path | None = None,
        config: Path | None = None, log: Callable[[str], None] = print,
        engines: list[str] | None = None) -> list[dict[str, Any]]:
    """One session at a time (on the least-loaded of ``engines``, default this process's engine)."""
    from swe_envs.sessions.hosts import Hosts
    from swe_envs.sessions.pool import SessionPool

    calls_for = _policy(policy)
    opens, refused = openers(instances, repos, tasks, out, config, log)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    pool = SessionPool(opens, hosts=Hosts.from_specs(engines, 1), log=log)
    # one line per finished session, written as it finishes: a run stopped half-way keeps what it did
    try:
        with open(out / "trajectories.jsonl", "w", encoding="utf-8") as fh:
            def emit(row: dict[str, Any]) -> None:
                rows.append(row)
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                fh.flush()

            for why in refused:  # malformed input rows: counted, with their reason
                emit({"id": None, "messages": [], "reward": None, "turns": 0, "error": why})
            for name in opens:
                try:
                    session = pool.open(name)
                except Exception as err:  # a build or environment that failed: a row with the reason, the run goes on
                    emit({"id": name, "messages": [], "reward": None, "turns": 0,
                          "error": f"{type(err).__name__}: {err}"})
                    log(f"{name}: session failed to open: {err}")
                    continue
                try:
                    row = episode(session, calls_for)
                finally:
                    pool.close(session.id)
                emit(row)
                log(f"{row['id']}: reward {row['reward']:g} in {row['turns']} tool call(s)")
    finally:
        pool.shutdown()
    return rows
