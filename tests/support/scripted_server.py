"""A real HTTP server on 127.0.0.1 that answers from a script, for failure injection.

Tests tell it what to answer to the next requests (status, body, raw bytes, delay) and read
back what it received and how many requests were in flight at once. Replies beyond the
script fall back to ``default`` (a valid chat completion echoing the last user message).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable; None = the default completion
    raw: bytes | None = None  # sent as-is (garbage bodies)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # extra headers (Retry-After, …)
    # wire-level faults: bytes written to the socket instead of an HTTP response (a garbage
    # status line, a Content-Length the body never reaches), then the connection is closed
    wire: bytes | None = None
    trickle_s: float = 0.0  # pause between the body's bytes (a server that never quite finishes)


def default_completion(request: dict[str, Any]) -> dict[str, Any]:
    if "messages" in request:
        content = request["messages"][-1]["content"]
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"echo: {content}"},
                             "finish_reason": "stop"}]}
    return {"choices": [{"index": 0, "text": f"echo: {request.get('prompt')}", "finish_reason": "stop"}]}


@dataclass
class ScriptedServer:
    script: deque = field(default_factory=deque)
    received: list = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    responder: Any = None  # optional callable(request) -> Reply, used when the script is empty

    def start(self) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with owner.lock:
                    owner.received.append(body)
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                    reply = owner.script.popleft() if owner.script else None
                if reply is None:
                    reply = owner.responder(body) if owner.responder else Reply()
                done = False
                try:
                    time.sleep(reply.delay_s)
                    # out of flight before the reply leaves: a client may send its next request
                    # as soon as it reads this one, before a `finally` here would have run
                    with owner.lock:
                        owner.in_flight -= 1
                        done = True
                    if reply.wire is not None:
                        self.wfile.write(reply.wire)
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    data = reply.raw if reply.raw is not None else json.dumps(
                        reply.body if reply.body is not None else default_completion(body)).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if reply.trickle_s:
                        for i in range(len(data)):
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle_s)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    pass  # the client gave up (timeout test): fine
                finally:
                    if not done:
                        with owner.lock:
                            owner.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
