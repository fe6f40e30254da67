"""Multi-turn task backends over environment sessions: ``swe`` (SWE instances) and ``terminal`` (Harbor tasks).

One episode is one session (``swe_envs.sessions``: a container from the instance's verified image or
the task's image, offline, limited, no host mounts). The orchestrator drives it turn by turn:

* ``instance(seed)``: the instruction as the prompt, the session tools (``bash``,
  ``str_replace_editor``, ``submit``) for the chat template's tool block, ``max_turns`` and the
  episode's model-token budget; ``session: true`` tells the orchestrator to keep the episode on
  this replica and to name it (``episode``) in every call.
* ``step(instance, turns, messages, episode)``: the model's last turn (its GLM-5 ``<tool_call>``
  blocks, parsed into ``tool_calls`` by the orchestrator) runs in the episode's session, which is
  opened on its first step; the results come back as ``tool`` messages (context, never trained).
  ``None`` ends the episode: ``submit`` was called, or its wall-clock budget is spent.
* ``reward(instance, messages, turns, episode)``: the session's own verifier (SWE: FAIL_TO_PASS ∪
  PASS_TO_PASS on the container's diff; Harbor: ``tests/test.sh``), then the session is closed. A
  multi-step Harbor task verifies each step at its ``submit`` and the next instruction comes as a
  user turn; the reward is the mean over steps.
* ``close(episode)``: an episode the orchestrator gave up (aborted, failed, run ended).

Sessions are closed on every path: reward, ``close``, the pool's reaper (idle past
``idle_timeout_s`` or older than ``wall_s`` plus a grace), ``shutdown`` when the service stops;
containers of a killed service carry the owner label: the next service started on the host removes
them (as ``python -m swe_envs cleanup`` does).
Relative data paths in the arguments resolve under the user cache (``core.cache``), so a config's
defaults work from any directory.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputError

# the evaluation harness's error reasons that are the model's doing (anything else: no judgement)
MODEL_FAULTS = ("malformed patch", "model_patch", "the test run hit its time limit")


def model_judged(verdict: dict) -> bool:
    """Whether a verify judged the model's work (a reward, 0 included) or failed itself (no reward:
    an environment error is never scored 0). SWE: ``status`` error with a reason that is not the
    patch's fault; Harbor: an ``error`` and no reward file."""
    if verdict.get("status") == "error":
        return str(verdict.get("reason") or "").startswith(MODEL_FAULTS)
    return not (verdict.get("error") and not verdict.get("rewards"))


class RewardUnavailable(RuntimeError):
    """The verifier could not judge (an environment or harness error): no reward, never a 0."""


class SessionLost(RuntimeError):
    """The episode's session is gone (reaped, or opened on a replica that died): start it over."""


class SessionsBusy(RuntimeError):
    """Every session slot stayed taken for ``open_wait_s``."""


def data_path(p: str | Path) -> Path:
    from core.cache import cache_dir

    path = Path(p).expanduser()
    return path if path.is_absolute() else cache_dir() / path


@dataclass
class Episode:
    session: Any
    started: float = field(default_factory=time.monotonic)
    rewards: list[float] = field(default_factory=list)
    verdicts: list[dict] = field(default_factory=list)
    ended: str = ""  # submit | wall_clock | turns (the orchestrator's max_turns or token budget)


class SessionTasks:
    session = True

    def __init__(self, openers: dict[str, Callable[[], Any]], instructions: dict[str, str], max_turns: int = 30,
                 max_tokens: int | None = None, wall_s: float = 1800.0, max_sessions: int = 8,
                 idle_timeout_s: float = 900.0, open_wait_s: float = 900.0, max_observation_chars: int = 4000,
                 engines: list[str] | None = None, warm: int = 0):
        from swe_envs.sessions.hosts import Hosts
        from swe_envs.sessions.pool import SessionPool

        if not openers:
            raise InputError("no instance or task to open sessions on")
        hosts = Hosts.from_specs(engines, max_sessions)  # max_sessions: per engine
        # containers of a service killed before it could close them (SIGKILL, OOM): its successor
        # removes them from every engine before opening any (owner label: a process of this host that is gone)
        self.swept = hosts.sweep()
        self.names = sorted(openers)
        self.instructions = instructions
        self.max_turns, self.max_tokens, self.wall_s = max_turns, max_tokens, wall_s
        self.open_wait_s, self.max_chars = open_wait_s, max_observation_chars
        # the pool bounds this host's containers and reaps the ones nobody steps or closes
        self.pool = SessionPool(openers, max_sessions, idle_timeout_s, max_lifetime_s=wall_s + idle_timeout_s,
                                hosts=hosts, warm=warm, log=lambda m: print(m, file=sys.stderr))
        self.episodes: dict[str, Episode] = {}
        self.graded: OrderedDict[str, tuple[float, dict]] = OrderedDict()  # a retried /reward gets the same answer
        self.lock = threading.Lock()

    # -- the task service's backend interface ------------------------------------------------------
    def instance(self, seed: int) -> dict:
        from swe_envs.sessions.tools import TOOLS

        name = self.names[seed % len(self.names)]
        out = {"id": name, "messages": [{"role": "user", "content": self.instructions[name]}], "tools": TOOLS,
               "max_turns": self.max_turns, "session": True}
        if self.max_tokens:
            out["max_tokens"] = self.max_tokens
        return out

    def step(self, instance: dict, turns: list, messages: list[dict] | None = None,
             episode: str | None = None) -> list[dict] | None:
        last = (messages or [{}])[-1]
        if last.get("role") != "assistant" or not episode:
            raise ValueError("a session step needs the episode and the messages ending with the model's turn")
        first = sum(m.get("role") == "assistant" for m in messages) == 1
        ep = self._episode(str(instance["id"]), episode, open_new=first)
        if time.monotonic() - ep.started > self.wall_s:
            ep.ended = "wall_clock"
            return None
        calls = last.get("tool_calls") or []
        if not calls:  # the model handed over without a call the template could parse
            return [{"role": "tool", "content": "error: no tool call found in your reply; call bash, "
                                                "str_replace_editor or submit"}]
        from swe_envs.sessions.tools import cap

        results: list[dict] = []
        for call in calls:
            fn = call.get("function") or {}
            obs = ep.session.step(str(fn.get("name", "")), fn.get("arguments") or "{}")
            if obs.done:
                return self._submitted(ep, results)
            results.append({"role": "tool", "content": cap(obs.text, self.max_chars)})
        return results

    def reward(self, instance: dict, messages: list[dict], turns=None, episode: str | None = None) -> tuple[float, dict]:
        if not episode:
            raise ValueError("a session reward needs the episode")
        with self.lock:
            if episode in self.graded:
                return self.graded[episode]
        # an episode that never stepped (the model answered without a tool call) is graded too:
        # a fresh session's state, as the model left it (untouched)
        ep = self._episode(str(instance["id"]), episode, open_new=not any(m.get("role") == "tool" for m in messages))
        try:
            t0 = time.monotonic()
            if not ep.rewards or getattr(ep.session, "steps_left", 0) > 0:  # the last step is not verified yet
                self._verify(ep)
            result = (sum(ep.rewards) / len(ep.rewards),
                      {"steps": ep.verdicts, "ended": ep.ended or "turns", "tool_calls": ep.session.turns,
                       "verify_s": round(time.monotonic() - t0, 2),
                       # the environment's share of the episode: its first step to the verdict
                       "episode_s": round(time.monotonic() - ep.started, 2)})
        finally:
            self.close(episode)
        with self.lock:
            self.graded[episode] = result
            while len(self.graded) > 4096:
                self.graded.popitem(last=False)
        return result

    def grade_files(self, name: str, files: dict[str, str]) -> tuple[float, dict]:
        """A single-shot answer: ``files`` (container path -> text) written by the editor tool in a
        fresh session of ``name``, then its verifier; the session is closed on every path."""
        key = f"files-{uuid.uuid4().hex}"
        ep = self._episode(name, key, open_new=True)
        try:
            for path, text in files.items():
                obs = ep.session.step("str_replace_editor", {"command": "create", "path": path, "file_text": text})
                if obs.error:
                    raise RewardUnavailable(f"{name}: could not write {path}: {obs.text}")
            self._verify(ep)
            return ep.rewards[-1], ep.verdicts[-1]
        finally:
            self.close(key)

    def close(self, episode: str) -> bool:
        with self.lock:
            ep = self.episodes.pop(episode, None)
        if ep is not None:
            self.pool.close(ep.session.id)
        return ep is not None

    def shutdown(self) -> None:
        with self.lock:
            self.episodes.clear()
        self.pool.shutdown()

    # -- episodes ----------------------------------------------------------------------------------
    def _episode(self, name: str, key: str, open_new: bool) -> Episode:
        with self.lock:
            ep = self.episodes.get(key)
        if ep is not None and ep.session.id in self.pool.sessions:
            return ep
        if ep is not None or not open_new:
            self.close(key)
            raise SessionLost(f"episode {key}: its session is gone (reaped or never opened here)")
        deadline = time.monotonic() + self.open_wait_s
        while True:
            try:
                session = self.pool.open(name)
                break
            except OverflowError:  # every slot is taken: wait for one, as a request waits for a server
                if time.monotonic() > deadline:
                    raise SessionsBusy(f"{self.pool.max_sessions} sessions stayed open for {self.open_wait_s}s") from None
                time.sleep(0.5)
        ep = Episode(session)
        with self.lock:
            self.episodes[key] = ep
        return ep

    def _verify(self, ep: Episode) -> None:
        reward, verdict = ep.session.verify()
        if not model_judged(verdict):
            raise RewardUnavailable(f"the verifier could not judge: {verdict}")
        ep.rewards.append(float(reward))
        ep.verdicts.append(verdict)

    def _submitted(self, ep: Episode, results: list[dict]) -> list[dict] | None:
        """``submit``: the episode ends, unless a multi-step task has a next step (verified now,
        its instruction the next user turn)."""
        if getattr(ep.session, "steps_left", 0) > 1:
            self._verify(ep)
            return results + [{"role": "tool", "content": f"step verified: reward {ep.rewards[-1]:g}"},
                              {"role": "user", "content": ep.session.instruction}]
        ep.ended = "submit"
        return None


def swe_sessions(instances: str, repos: str | None = None, config: str | None = None, out: str | None = None,
                 **opts: Any) -> SessionTasks:
    """SWE instances (validate's validated.jsonl, or SWE-bench JSONL with ``repos``: clones or
    bundles as ``swe_envs validate`` takes them); environments are built on demand and cached."""
    from swe_envs.sessions.run import openers
    from swe_envs.sessions.session import swe_instruction

    path = data_path(instances)
    if not path.is_file():
        raise InputError(f"SWE instances: not a file: {path}")
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="swe-sessions-"))
    opens, refused = openers(path, data_path(repos) if repos else None, None, work,
                             data_path(config) if config else None, log=lambda m: print(m, file=sys.stderr))
    for why in refused:
        print(f"SWE instance refused: {why}", file=sys.stderr)
    from core.io import read_jsonl

    rows = {r.get("instance_id"): r for r in read_jsonl(path, "SWE instances") if isinstance(r, dict)}
    return SessionTasks(opens, {iid: swe_instruction(rows[iid]) for iid in opens}, **opts)


def terminal_sessions(tasks: str, config: str | None = None, out: str | None = None, **opts: Any) -> SessionTasks:
    """Harbor tasks (a task directory or a tree of them); old-layout Terminal-Bench tasks
    (``task.yaml``) are converted once, at load, under their own names."""
    from core.cli import load_cli_config
    from swe_envs.sessions.session import TerminalSession
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.convert import convert_tree, is_tb_task
    from swe_envs.terminal.task import load_task
    from swe_envs.terminal.trial import Context

    root = data_path(tasks)
    if not root.is_dir():
        raise InputError(f"terminal tasks: not a directory: {root}")
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="terminal-sessions-"))
    dirs = sorted(p.parent for p in root.rglob("task.toml"))
    if (root / "task.yaml").is_file() or any(is_tb_task(p.parent) for p in root.rglob("task.yaml")):
        done, failed = convert_tree(root, work / "converted" / root.name)
        for rel, why in failed:  # counted and named, never silently missing from the task list
            print(f"terminal task {rel}: not converted: {why}", file=sys.stderr)
        dirs += sorted(done)
    if not dirs:
        raise InputError(f"no Harbor task (task.toml) or Terminal-Bench task (task.yaml) in {root}")
    cfg = load_cli_config(TerminalConfig, data_path(config) if config else None, None)
    loaded = {d: load_task(d) for d in dirs}

    def context(host) -> Context:  # one runner context per Docker engine
        return Context(cfg, log=lambda m: None, client=host.client())

    opens = {t.name: (lambda host, d=d: TerminalSession(host.state("terminal", context), d, work / "verifier"))
             for d, t in loaded.items()}
    return SessionTasks(opens, {t.name: t.steps[0].instruction for t in loaded.values()}, **opts)
