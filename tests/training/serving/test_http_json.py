"""The JSON-over-HTTP helpers every RL process uses: a port in use is a one-line user error, a
refused registration is an error at once, and an orchestrator not up yet is waited for."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from core.errors import UserError
from training.serving.http_json import HttpError, register_with, serve_json


def test_a_port_in_use_is_a_user_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(UserError, match=rf"cannot listen on 127.0.0.1:{s.getsockname()[1]}"):
            serve_json({}, "127.0.0.1", s.getsockname()[1])


def test_register_with_refusal_waiting_and_timeout():
    def refuse(body):
        raise HttpError(400, f"unknown task {body.get('name')!r}")

    srv = serve_json({"POST /register": refuse})
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        t0 = time.monotonic()
        with pytest.raises(UserError, match="http_400.*unknown task 'x'"):
            register_with(url, {"name": "x"}, timeout_s=30)
        assert time.monotonic() - t0 < 10  # a refusal is final: not retried until the timeout
    finally:
        srv.shutdown()
        srv.server_close()

    with socket.socket() as s:  # a port nothing listens on yet; the orchestrator comes up a bit later
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    late: list = []
    timer = threading.Timer(1.0, lambda: late.append(serve_json({"POST /register": lambda b: {"ok": True}},
                                                                "127.0.0.1", port)))
    timer.start()
    try:
        assert register_with(f"http://127.0.0.1:{port}", {}, timeout_s=30) == {"ok": True}
    finally:
        timer.join()
        for srv in late:
            srv.shutdown()
            srv.server_close()
    with pytest.raises(UserError, match="connection"):
        register_with(f"http://127.0.0.1:{port}", {}, timeout_s=0.5)
