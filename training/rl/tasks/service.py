"""A task service: one task's instances and rewards as an HTTP process on 127.0.0.1.

Routes: ``GET /health`` (``warming`` with 503 until the backend is loaded, then ``ok``),
``POST /task {"seed"}`` -> ``{"instance"}``, ``POST /step {"instance", "turns"}`` ->
``{"observation": ids | null}`` (multi-turn tasks), ``POST /reward {"instance", "messages", "turns"}``
-> ``{"reward", "info"}``; session tasks (``swe``, ``terminal``) also take ``messages`` and
``episode`` in ``/step`` (-> ``tool`` messages) and ``/reward``, ``POST /close {"episode"}`` ends a
given-up episode's session, and 410 says an episode's session is gone (start it over). The server
answers before the backend is built, so the orchestrator's heartbeat sees a live-but-warming
service and does not kill it during a slow start (a search corpus to load, a harness to check). ``--register URL`` announces it to an orchestrator.

``python -m training.rl task-service --kind toy --name arith --args '{"task": "arithmetic"}'``
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from core.errors import ConfigError, UserError
from training.rl.tasks.backends import build_backend
from training.rl.tasks.sessions import RewardUnavailable, SessionLost, SessionsBusy
from training.serving.faults import ServerFaults
from training.serving.http_json import HttpError, exit_with_parent, register_with, serve_json


class TaskService:
    def __init__(self, kind: str, name: str, args: dict[str, Any], capacity: int = 4,
                 faults: ServerFaults | None = None, warmup_s: float = 0.0):
        self.kind, self.name, self.args, self.capacity = kind, name, args, capacity
        self.faults = faults or ServerFaults()
        self.warmup_s = warmup_s  # extra start-up delay: stands in for a slow model/corpus load
        self.backend = None
        self.error: str | None = None
        self.inflight = 0
        self.served = {"task": 0, "reward": 0, "reward_unavailable": 0}
        self.lock = threading.Lock()

    def load(self) -> None:
        try:
            time.sleep(self.warmup_s)
            self.backend = build_backend(self.kind, self.args)
        except UserError as err:
            self.error = str(err)

    def _ready(self):
        if self.error:
            raise HttpError(500, f"backend failed to load: {self.error}")
        if self.backend is None:
            raise HttpError(503, "warming")
        return self.backend

    def health(self, body: dict) -> dict:
        if self.error:
            raise HttpError(500, f"backend failed to load: {self.error}")
        if self.backend is None:
            raise HttpError(503, "warming")
        return {"status": "ok", "name": self.name, "kind": self.kind, "capacity": self.capacity,
                "inflight": self.inflight, "served": self.served}

    def task(self, body: dict) -> dict:
        backend = self._ready()
        seed = body.get("seed")
        if not isinstance(seed, int):
            raise HttpError(400, "seed (int) is required")
        self.served["task"] += 1
        return {"instance": backend.instance(seed)}

    def reward(self, body: dict) -> dict:
        backend = self._ready()
        inst, messages = body.get("instance"), body.get("messages")
        if not isinstance(inst, dict) or not isinstance(messages, list) or not messages:
            raise HttpError(400, "reward needs instance (object) and messages (non-empty list)")
        with self.lock:
            self.inflight += 1
        turns = body.get("turns")
        try:
            if getattr(backend, "session", False):
                value, info = backend.reward(inst, messages, turns, episode=body.get("episode"))
            else:
                value, info = backend.reward(inst, messages, turns)
        except SessionLost as err:
            raise HttpError(410, str(err)) from None
        except (RewardUnavailable, SessionsBusy) as err:
            self.served["reward_unavailable"] += 1
            raise HttpError(503, f"reward unavailable: {err}") from None
        except (KeyError, ValueError, TypeError, IndexError, StopIteration) as err:
            raise HttpError(400, f"cannot grade this request: {type(err).__name__}: {err}") from None
        finally:
            with self.lock:
                self.inflight -= 1
        self.served["reward"] += 1
        return {"reward": value, "info": info}

    def step(self, body: dict) -> dict:
        backend = self._ready()
        inst, turns = body.get("instance"), body.get("turns")
        if not isinstance(inst, dict) or not isinstance(turns, list) or not turns:
            raise HttpError(400, "step needs instance (object) and turns (non-empty list of token lists)")
        if not hasattr(backend, "step"):
            return {"observation": None}  # single-turn task: the episode ends after one turn
        try:
            if getattr(backend, "session", False):
                return {"observation": backend.step(inst, turns, body.get("messages"), body.get("episode"))}
            return {"observation": backend.step(inst, turns)}
        except SessionLost as err:  # the orchestrator starts the episode over
            raise HttpError(410, str(err)) from None
        except (SessionsBusy, RuntimeError) as err:  # no free slot, or an environment that did not open
            raise HttpError(503, f"session unavailable: {type(err).__name__}: {str(err)[:500]}") from None
        except (KeyError, ValueError, TypeError, IndexError) as err:
            raise HttpError(400, f"cannot step this request: {type(err).__name__}: {err}") from None

    def close(self, body: dict) -> dict:
        """An episode the orchestrator gave up: its session goes now, not at the reaper's next pass."""
        backend = self._ready()
        episode = body.get("episode")
        if not isinstance(episode, str):
            raise HttpError(400, "close needs the episode (str)")
        return {"closed": bool(getattr(backend, "session", False) and backend.close(episode))}

    def shutdown(self) -> None:
        if self.backend is not None and hasattr(self.backend, "shutdown"):
            self.backend.shutdown()

    def routes(self) -> dict:
        return {"GET /health": self.health, "POST /task": self.faults.wrap(self.task),
                "POST /step": self.faults.wrap(self.step), "POST /reward": self.faults.wrap(self.reward),
                "POST /close": self.close}


app = typer.Typer(add_completion=False, help="Serve one task's instances and rewards over HTTP.")


@app.command()
@user_errors(sigterm_unwinds=True)
def main(
    kind: str = typer.Option("toy", help="toy | arithmetic | search | swe | terminal"),
    name: str = typer.Option(None, help="task name (the task id trajectories carry); default: the kind"),
    args: str = typer.Option("{}", help="backend arguments as JSON, e.g. '{\"kind\": \"copy\", \"digits\": 2}' "
                             "(toy), '{\"tasks\": \"search.jsonl\"}' (search)"),
    port: int = typer.Option(0, help="0 picks a free port"),
    host: str = typer.Option("127.0.0.1"),
    capacity: int = typer.Option(4, help="concurrent requests announced to the orchestrator"),
    register: str = typer.Option(None, help="orchestrator URL to register with"),
    key: str = typer.Option(None, help="slot key the orchestrator launched this service under"),
    warmup_s: float = typer.Option(0.0, help="extra start-up delay (stands in for a slow load)"),
    slow_prob: float = typer.Option(0.0, help="fault injection: share of replies delayed by --slow-s"),
    slow_s: float = typer.Option(0.0),
    garble_prob: float = typer.Option(0.0, help="fault injection: share of replies that are not JSON"),
    fault_log: str = typer.Option(None, help="append one JSON line per injected fault here"),
    seed: int = typer.Option(0, help="fault injection seed"),
    port_file: str = typer.Option(None, help="write the bound port here once listening"),
) -> None:
    if key:  # launched by an orchestrator: gone with it
        exit_with_parent()
    try:
        backend_args = json.loads(args)
    except json.JSONDecodeError as err:
        raise ConfigError(f"--args is not JSON: {err}") from None
    name = name or kind
    faults = ServerFaults(slow_prob, slow_s, garble_prob, fault_log, seed, who="task")
    svc = TaskService(kind, name, backend_args, capacity, faults, warmup_s)
    server = serve_json(svc.routes(), host, port)
    endpoint = f"http://{host}:{server.server_address[1]}"
    if port_file:
        Path(port_file).write_text(str(server.server_address[1]))
    if register:  # announce first: the heartbeat then watches the warm-up
        res = register_with(register, {"key": key, "role": "task", "name": name, "endpoint": endpoint,
                                       "capacity": capacity})
        typer.echo(f"registered with {register}: {res}", err=True)
    typer.echo(f"task service {name} ({kind}) on {endpoint}", err=True)
    svc.load()
    if svc.error:
        raise UserError(svc.error)
    typer.echo(f"task service {name} ready", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:  # SIGTERM unwinds here too (user_errors): sessions' containers go with us
        server.shutdown()
    finally:
        svc.shutdown()
