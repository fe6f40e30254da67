"""``python -m swe_envs session serve``: environment sessions over HTTP, for any trainer or agent.

    POST   /sessions              {"id": TASK_OR_INSTANCE_ID} -> {"session_id", "instruction", "tools"}
    POST   /sessions/ID/step      {"name", "arguments"}      -> {"observation", "done", "error"}
    POST   /sessions/ID/verify                               -> {"reward", "details", "steps_left"}
    DELETE /sessions/ID                                      -> {"closed": true}
    GET    /sessions                                         -> {"open": [...], "available": [...]}

Clients name what to open by id among what the server was started with (``--tasks DIR`` or
``--instances FILE --repos DIR``): no client chooses a host path. The pool (``swe_envs.sessions.pool``)
places sessions on its Docker engines, at most ``max_sessions`` per engine (429 past every bound),
keeps ``--warm`` sessions started ahead of need, and reaps idle and over-age ones; every session is
closed when the server stops. Containers carry the owner label, so ``python -m swe_envs cleanup``
(or the next service) removes those of a killed server.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from swe_envs.sessions.pool import SessionPool
from swe_envs.sessions.tools import TOOLS


def make_server(pool: SessionPool, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the CLI prints what matters
            pass

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("Content-Length") or 0)
            if n > 64 * 2**20:
                raise ValueError("request body over 64 MB")
            raw = self.rfile.read(n) if n else b"{}"
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            return body

        def _route(self) -> tuple[str, str | None, str | None]:
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if not parts or parts[0] != "sessions" or len(parts) > 3:
                return "", None, None
            return "sessions", parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None

        def do_GET(self):
            kind, sid, _ = self._route()
            if kind and sid is None:
                return self._send(200, {"open": [{"session_id": s.id, "name": s.name, "turns": s.turns,
                                                  "engine": s.host.name if getattr(s, "host", None) else None}
                                                 for s in list(pool.sessions.values())],
                                        "available": sorted(pool.openers), **pool.describe()})
            self._send(404, {"error": f"no route GET {self.path}"})

        def do_POST(self):
            kind, sid, action = self._route()
            try:
                body = self._body()
            except (ValueError, json.JSONDecodeError) as err:
                return self._send(400, {"error": f"bad request: {err}"})
            if not kind:
                return self._send(404, {"error": f"no route POST {self.path}"})
            try:
                if sid is None:
                    session = pool.open(str(body.get("id", "")))
                    return self._send(200, {"session_id": session.id, "name": session.name,
                                            "instruction": session.instruction, "tools": TOOLS})
                session = pool.get(sid)
                if action == "step":
                    obs = session.step(str(body.get("name", "")), body.get("arguments") or {})
                    return self._send(200, {"observation": obs.text, "done": obs.done, "error": obs.error})
                if action == "verify":
                    reward, details = session.verify()
                    return self._send(200, {"reward": reward, "details": details,
                                            "steps_left": getattr(session, "steps_left", 0)})
                return self._send(404, {"error": f"no action {action!r} (step, verify)"})
            except KeyError as err:
                return self._send(404, {"error": f"unknown session or id: {err}"})
            except OverflowError as err:
                return self._send(429, {"error": str(err)})
            except Exception as err:  # a build or container that failed: the client gets the reason
                return self._send(500, {"error": f"{type(err).__name__}: {str(err)[:500]}"})

        def do_DELETE(self):
            kind, sid, action = self._route()
            if not kind or sid is None or action:
                return self._send(404, {"error": f"no route DELETE {self.path}"})
            closed = pool.close(sid)
            self._send(200 if closed else 404, {"closed": closed})

    return ThreadingHTTPServer((host, port), Handler)
