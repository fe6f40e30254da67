"""JSON over HTTP on loopback, shared by the rollout server, the task services and the orchestrator.

Server side: ``serve_json(routes, host, port)`` runs a threading HTTP server whose handlers are
plain functions ``(body: dict) -> dict`` keyed by ``"GET /path"`` / ``"POST /path"``. A handler
raises ``HttpError(code, message)`` for a client error; anything else becomes a 500 with the
exception named, so one bad request never takes the process down. A handler may return
``RawReply`` to send bytes as-is (fault injection sends garbled bodies this way).

Client side: ``call(url, payload)`` returns the decoded body or a ``CallFailure`` naming the kind
(``connection``, ``timeout``, ``http_<code>``, ``garbled``): the orchestrator decides from the kind
whether to retry, resubmit elsewhere or drop, so failures are values, not exceptions.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Handler = Callable[[dict[str, Any]], Any]


class HttpError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class RawReply:
    status: int
    data: bytes


@dataclass
class CallFailure:
    url: str
    kind: str  # connection | timeout | http_<code> | garbled
    message: str

    def __str__(self) -> str:
        return f"{self.url}: {self.kind}: {self.message}"


def _make_handler(routes: dict[str, Handler]):
    class JsonHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: callers record failures themselves
            pass

        def _send(self, code: int, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _dispatch(self, method: str) -> None:
            url = urlparse(self.path)
            fn = routes.get(f"{method} {url.path.rstrip('/') or '/'}")
            try:
                if method == "POST":
                    raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    try:
                        body = json.loads(raw or b"{}")
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        raise HttpError(400, "body is not JSON") from None
                    if not isinstance(body, dict):
                        raise HttpError(400, "body must be a JSON object")
                else:
                    body = {k: v[-1] for k, v in parse_qs(url.query).items()}
                if fn is None:
                    raise HttpError(404, f"no route {method} {url.path}")
                out = fn(body)
                if isinstance(out, RawReply):
                    self._send(out.status, out.data)
                else:
                    self._send(200, json.dumps(out).encode())
            except HttpError as err:
                self._send(err.code, json.dumps({"error": {"message": str(err), "code": err.code}}).encode())
            except Exception as err:  # a server must answer, not die: report it as a 500
                msg = f"{type(err).__name__}: {err}"
                self._send(500, json.dumps({"error": {"message": msg, "code": 500}}).encode())

        def do_GET(self):
            self._dispatch("GET")

        def do_POST(self):
            self._dispatch("POST")

    return JsonHandler


def serve_json(routes: dict[str, Handler], host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Start serving ``routes`` in a daemon thread; the bound port is ``server.server_address[1]``."""
    from core.errors import UserError

    try:
        server = ThreadingHTTPServer((host, port), _make_handler(routes))
    except OSError as err:  # a port in use (or a host not ours) is the user's to fix: say which
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name=f"http:{port}").start()
    return server


# a proxy configured for the outside world must never intercept loopback calls
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(url: str, payload: dict[str, Any] | None = None, timeout_s: float = 30.0) -> Any:
    """POST ``payload`` (GET when None) and decode the JSON answer, or return a ``CallFailure``."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="GET" if payload is None else "POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as err:
        detail = err.read()[:300].decode("utf-8", "replace") if err.fp else str(err.reason)
        return CallFailure(url, f"http_{err.code}", detail)
    except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
        reason = getattr(err, "reason", err)
        kind = "timeout" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "connection"
        return CallFailure(url, kind, str(reason))
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return CallFailure(url, "garbled", f"not JSON: {raw[:60]!r}")


def register_with(orchestrator: str, payload: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    """POST ``payload`` to the orchestrator's ``/register``. An orchestrator not answering yet is
    retried until ``timeout_s`` (services may start first); a refusal (4xx: an unknown task name,
    say) or no answer in time raises ``UserError`` — a service never runs on believing it joined."""
    from core.errors import UserError

    url = f"{orchestrator.rstrip('/')}/register"
    deadline = time.monotonic() + timeout_s
    while True:
        res = call(url, payload, timeout_s=10.0)
        if not isinstance(res, CallFailure):
            return res
        if res.kind.startswith("http_4") or time.monotonic() >= deadline:
            raise UserError(f"registration with {orchestrator} failed: {res.kind}: {res.message[:300]}")
        time.sleep(0.5)


def exit_with_parent(poll_s: float = 1.0, parent: int | None = None) -> None:
    """A managed server must not outlive the orchestrator that launched it: an orchestrator killed
    with SIGKILL cannot stop its children (they run in their own sessions), so each one watches
    for being re-parented and then sends itself SIGTERM (its normal, unwinding shutdown).
    ``parent``: the pid the caller was started by, where it may already have died before this runs
    (a pool worker's initializer runs after the interpreter started)."""
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()
