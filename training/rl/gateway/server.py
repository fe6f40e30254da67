"""``python -m training.rl gateway``: an OpenAI-compatible endpoint for external agents, recorded for training.

    POST /sessions {"task", "group", "group_size"}  -> {"session_id", "base_url"}
    POST /sessions/ID/v1/chat/completions           OpenAI chat completions (tools, tool_calls, logprobs,
                                                    stream: server-sent chunks)
    GET  /sessions/ID/v1/models
    POST /sessions/ID/finish {"reward", "info"}     -> {"trajectories": [...]}
    GET  /sessions/ID                               -> calls, segments, tokens
    GET  /health

An agent framework points its OpenAI client at ``base_url`` (the session is in the path, so any
client works unchanged). Each call is rendered with the GLM-5 chat template and generated
token-in/token-out on a rollout server (``/generate``: sampled ids, logprobs, a weight version per
token), and recorded (``recorder.Recording``); the reply comes back parsed into ``content``,
``reasoning_content`` and ``tool_calls``. With ``stream: true`` the same reply comes as OpenAI's
``chat.completion.chunk`` events (role, reasoning, content with its logprobs, each tool call whole,
the finish reason, usage when ``stream_options.include_usage``, then ``[DONE]``) once it is generated:
the rollout server's ``/generate`` returns whole completions, so the chunks carry no earlier first
token, only the protocol agents that always stream need. ``finish`` with the environment's reward turns the session
into training trajectories: appended to ``OUT/trajectories.jsonl`` and, with ``--orchestrator URL``,
handed to the async trainer's buffer (``POST /trajectories``) once every session of its group has
finished — a group of one cannot be normalised, so agents running a task several times share a group.
"""

from __future__ import annotations

import base64
import itertools
import json
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from core.errors import UserError
from training.policy import ChatCodec
from training.policy.codec import Codec
from training.rl.gateway.recorder import Recording
from training.serving import rollout_client
from training.serving.http_json import CallFailure, HttpError, call


class Gateway:
    def __init__(self, upstreams: list[str], codec: ChatCodec, backend: str = "ours", orchestrator: str | None = None,
                 out: Path | None = None, thinking: bool = False, max_tokens: int = 512, timeout_s: float = 600.0):
        if not upstreams:
            raise UserError("give at least one --upstream rollout server")
        self.upstreams, self.codec, self.backend = itertools.cycle(upstreams), codec, backend
        self.orchestrator, self.out, self.thinking = orchestrator, out, thinking
        self.max_tokens, self.timeout_s = max_tokens, timeout_s
        self.sessions: dict[str, Recording] = {}
        self.groups: dict[str, dict[str, Any]] = {}  # group -> {"size", "done": [trajectories]}
        self.lock = threading.Lock()
        self.base = ""

    def open(self, body: dict) -> dict:
        sid = uuid.uuid4().hex[:12]
        group = str(body.get("group") or sid)
        rec = Recording(sid, str(body.get("task") or "agent"), group, self.codec, self.thinking)
        with self.lock:
            self.sessions[sid] = rec
            g = self.groups.setdefault(group, {"size": int(body.get("group_size") or 1), "done": [], "open": 0})
            g["open"] += 1
        return {"session_id": sid, "base_url": f"{self.base}/sessions/{sid}/v1"}

    def _session(self, sid: str) -> Recording:
        rec = self.sessions.get(sid)
        if rec is None:
            raise HttpError(404, f"no session {sid}")
        if rec.finished:
            raise HttpError(409, f"session {sid} is finished")
        return rec

    def chat(self, sid: str, body: dict) -> dict:
        rec = self._session(sid)
        messages, tools = body.get("messages"), body.get("tools") or None
        if not isinstance(messages, list) or not messages:
            raise HttpError(400, "messages must be a non-empty list")
        if body.get("n", 1) != 1:
            raise HttpError(400, "n must be 1 (an agent session is one trajectory)")
        thinking = bool(body.get("thinking", self.thinking))
        budget = int(body.get("max_completion_tokens") or body.get("max_tokens") or self.max_tokens)
        sampling = {"temperature": float(body.get("temperature", 1.0)), "top_p": float(body.get("top_p", 1.0)),
                    "max_tokens": budget, "stop_token_ids": self.codec.stop_ids}
        with rec.lock:
            try:
                ids = rec.context(messages, tools, thinking)
            except UserError as err:
                raise HttpError(400, str(err)) from None
            gen = rollout_client.generate(next(self.upstreams), self.backend, ids, sampling,
                                          f"gw-{sid}-{rec.calls}", self.timeout_s)
            if isinstance(gen, CallFailure):
                raise HttpError(502, f"upstream: {gen}")
            reply = self.codec.chat_reply(gen.output_ids, thinking=thinking)
            for c in reply.get("tool_calls") or []:
                c["id"] = f"call_{uuid.uuid4().hex[:12]}"
            rec.record(gen.output_ids, gen.logprobs, gen.versions, gen.finish_reason, reply)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": reply.get("content") or "",
                                                          **{k: reply[k] for k in ("reasoning_content", "tool_calls")
                                                             if reply.get(k)}},
                                  "finish_reason": "tool_calls" if reply.get("tool_calls") else
                                  ("length" if gen.finish_reason == "length" else "stop")}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": self.codec.token(t), "logprob": lp, "top_logprobs": []}
                                              for t, lp in zip(gen.output_ids, gen.logprobs, strict=True)]}
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                "model": str(body.get("model") or "policy"), "choices": [choice],
                "weight_version": max(gen.versions, default=0),
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(gen.output_ids),
                          "total_tokens": len(ids) + len(gen.output_ids)}}

    def finish(self, sid: str, body: dict) -> dict:
        reward = body.get("reward")
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            raise HttpError(400, "finish needs the session's reward (a number)")
        rec = self._session(sid)
        with rec.lock:
            rec.finished = True
            trajs = rec.trajectories(float(reward), body.get("info") or {})
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            with self.lock, open(self.out / "trajectories.jsonl", "a", encoding="utf-8") as fh:
                for t in trajs:
                    fh.write(json.dumps(t.payload(), ensure_ascii=False) + "\n")
        submitted = self._group_done(rec, trajs)
        return {"trajectories": [t.payload() for t in trajs], "submitted": submitted}

    def _group_done(self, rec: Recording, trajs: list) -> Any:
        """Hand the group to the trainer's buffer once all its sessions have finished."""
        with self.lock:
            g = self.groups[rec.group]
            g["done"] += trajs
            g["open"] -= 1
            ready = g["open"] == 0 and g["size"] <= sum(1 for s in self.sessions.values()
                                                        if s.group == rec.group and s.finished)
            if ready:
                del self.groups[rec.group]
        if not ready or not self.orchestrator or not g["done"]:
            return None
        res = call(f"{self.orchestrator}/trajectories", {"task": rec.task, "group": rec.group,
                                                         "trajectories": [t.payload() for t in g["done"]]}, 60)
        if isinstance(res, CallFailure):
            raise HttpError(502, f"orchestrator refused the group: {res}")
        return res

    def status(self, sid: str) -> dict:
        rec = self.sessions.get(sid)
        if rec is None:
            raise HttpError(404, f"no session {sid}")
        return {"session_id": sid, "task": rec.task, "group": rec.group, "calls": rec.calls,
                "segments": len(rec.segments), "finished": rec.finished,
                "tokens": [len(s.traj.tokens) for s in rec.segments]}

    def route(self, method: str, path: str, body: dict) -> dict:
        parts = [p for p in path.split("?")[0].split("/") if p]
        if method == "GET" and parts == ["health"]:
            return {"status": "ok", "sessions": len(self.sessions)}
        if parts[:1] != ["sessions"]:
            raise HttpError(404, f"no route {method} {path}")
        if method == "POST" and len(parts) == 1:
            return self.open(body)
        sid, rest = (parts[1], parts[2:]) if len(parts) > 1 else ("", [])
        if method == "POST" and rest == ["v1", "chat", "completions"]:
            reply = self.chat(sid, body)
            if not body.get("stream"):
                return reply
            return EventStream(stream_chunks(reply, bool((body.get("stream_options") or {}).get("include_usage"))))
        if method == "GET" and rest == ["v1", "models"]:
            return {"object": "list", "data": [{"id": "policy", "object": "model"}]}
        if method == "POST" and rest == ["finish"]:
            return self.finish(sid, body)
        if method == "GET" and not rest:
            return self.status(sid)
        raise HttpError(404, f"no route {method} {path}")


class EventStream(list):
    """Chunks a handler writes as ``text/event-stream`` (``data: {...}`` each, then ``data: [DONE]``)."""


def stream_chunks(reply: dict, include_usage: bool) -> list[dict]:
    """A whole ``chat.completion`` as OpenAI's ``chat.completion.chunk`` sequence; the client's
    accumulated deltas equal ``reply``'s message (tool calls are sent whole, one delta each)."""
    (choice,) = reply["choices"]
    msg = choice["message"]
    head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict, finish: str | None = None, logprobs: dict | None = None) -> dict:
        return head | {"choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if msg.get("reasoning_content"):
        out.append(chunk({"reasoning_content": msg["reasoning_content"]}))
    if msg.get("content") or choice.get("logprobs"):
        out.append(chunk({"content": msg.get("content") or ""}, logprobs=choice.get("logprobs")))
    for i, call_ in enumerate(msg.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, **call_}]}))
    out.append(chunk({}, choice["finish_reason"]) | {"weight_version": reply["weight_version"]})
    if include_usage:
        out.append(head | {"choices": [], "usage": reply["usage"]})
    return out


def serve(gw: Gateway, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _reply(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _events(self, chunks: EventStream) -> None:
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            try:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
                try:
                    body = json.loads(raw or b"{}")
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise HttpError(400, "body is not JSON") from None
                if not isinstance(body, dict):
                    raise HttpError(400, "body must be a JSON object")
                result = gw.route(method, self.path, body)
                if isinstance(result, EventStream):
                    self._events(result)
                else:
                    self._reply(200, result)
            except HttpError as err:  # OpenAI's error shape: SDKs raise it as the matching APIError
                self._reply(err.code, {"error": {"message": str(err), "type": "invalid_request_error", "code": err.code}})
            except Exception as err:  # noqa: BLE001 - a gateway answers, it does not die
                self._reply(500, {"error": {"message": f"{type(err).__name__}: {err}", "type": "server_error"}})

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    gw.base = f"http://{host}:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True, name="gateway").start()
    return server


def upstream_codec(upstream: str, tokenizer: Path | None) -> ChatCodec:
    """The tokenizer given (GLM-5's ``tokenizer.json``, or a Hugging Face model directory whose own
    chat template renders prompts), else the upstream rollout server's own (``GET /tokenizer``)."""
    from training.policy.hf import HFCodec

    if tokenizer is not None:
        return HFCodec.load(tokenizer) if tokenizer.is_dir() else Codec.load(tokenizer)
    res = call(f"{upstream.rstrip('/')}/tokenizer", None, 30)
    if isinstance(res, CallFailure) or not isinstance(res, dict):
        raise UserError(f"{upstream} serves no tokenizer ({res}); pass --tokenizer tokenizer.json or a model directory")
    if isinstance(res.get("hf_files"), dict):
        from transformers import AutoTokenizer

        with tempfile.TemporaryDirectory() as d:
            for name, data in res["hf_files"].items():
                (Path(d) / Path(name).name).write_bytes(base64.b64decode(str(data)))
            return HFCodec(AutoTokenizer.from_pretrained(d), [int(i) for i in res.get("stop_ids") or []])
    if not isinstance(res.get("tokenizer"), str):
        raise UserError(f"{upstream} serves no tokenizer ({res}); pass --tokenizer tokenizer.json or a model directory")
    from tokenizers import Tokenizer

    return Codec(Tokenizer.from_str(res["tokenizer"]))


app = typer.Typer(add_completion=False, help="OpenAI-compatible agent gateway that records sessions for training.")


@app.command()
@user_errors(sigterm_unwinds=True)
def main(
    upstream: list[str] = typer.Option(..., help="rollout server URL (repeat for several: round robin)"),
    port: int = typer.Option(8020, help="0 picks a free port"),
    host: str = typer.Option("127.0.0.1"),
    tokenizer: Path = typer.Option(None, help="tokenizer.json (GLM-5's template) or a Hugging Face model directory "
                                             "(its own template); default: the upstream's (GET /tokenizer)"),
    backend: str = typer.Option("ours", help="ours | sglang (both speak /generate)"),
    orchestrator: str = typer.Option(None, help="async RL orchestrator URL: finished groups go to its buffer"),
    out: Path = typer.Option(Path("out/gateway"), help="trajectories.jsonl of finished sessions goes here"),
    thinking: bool = typer.Option(False, help="render prompts with thinking on (a request may say otherwise)"),
    max_tokens: int = typer.Option(512, help="completion tokens per call unless the request says"),
    port_file: Path = typer.Option(None, help="write the bound port here once listening"),
) -> None:
    """Serve /sessions/ID/v1/chat/completions in front of rollout servers; /sessions/ID/finish records a reward."""
    if backend not in ("ours", "sglang"):
        raise UserError(f"--backend: ours or sglang, not {backend!r}")
    gw = Gateway([u.rstrip("/") for u in upstream], upstream_codec(upstream[0], tokenizer), backend,
                 orchestrator.rstrip("/") if orchestrator else None, out.absolute(), thinking, max_tokens)
    server = serve(gw, host, port)
    if port_file:
        port_file.write_text(str(server.server_address[1]))
    typer.echo(f"gateway on {gw.base} -> {', '.join(upstream)}; trajectories -> {out / 'trajectories.jsonl'}", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
