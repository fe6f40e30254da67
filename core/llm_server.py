"""A small OpenAI-compatible HTTP server over a local causal LM (SmolLM2 by default).

Serves the subset of the vLLM/SGLang API that our stages use, so the same client code runs
against this server in tests and demos and against a real inference cluster in production:

* ``POST /v1/chat/completions`` — chat template applied; ``logprobs``/``top_logprobs``
* ``POST /v1/completions`` — raw prompt; ``logprobs: N`` returns the top-N per token
* ``GET /v1/models``, ``GET /health``

Generation is greedy at ``temperature: 0`` and seeded sampling otherwise. One model, one
lock: requests are served one at a time (the client's concurrency limit still matters for
real servers). ``python -m core.llm_server --help``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import typer

MAX_NEW_TOKENS = 1024


class BadRequest(Exception):
    pass


class LocalModel:
    """Wraps (model, tokenizer) with the two operations the API needs."""

    def __init__(self, model_dir: str | Path, name: str | None = None, threads: int = 0):
        from core.local_lm import load_causal_lm

        self.model, self.tok = load_causal_lm(model_dir, threads=threads)
        self.name = name or Path(model_dir).name
        self.lock = threading.Lock()

    def _token_str(self, tid: int) -> str:
        return self.tok.decode([tid])

    def generate(self, prompt_ids: list[int], params: dict[str, Any]) -> dict[str, Any]:
        import torch

        max_tokens = params.get("max_tokens")
        max_tokens = 16 if max_tokens is None else max_tokens
        if not isinstance(max_tokens, int) or not 0 < max_tokens <= MAX_NEW_TOKENS:
            raise BadRequest(f"max_tokens must be an integer in 1..{MAX_NEW_TOKENS}")
        temperature = float(params.get("temperature", 1.0) or 0.0)
        top_n = int(params.get("top_logprobs") or 0)
        stops = params.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        ids = torch.tensor([prompt_ids])
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "do_sample": temperature > 0,
            "output_logits": True,
            "return_dict_in_generate": True,
            "pad_token_id": self.tok.eos_token_id,
            "attention_mask": torch.ones_like(ids),
        }
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=float(params.get("top_p", 1.0)), top_k=0)
        if stops:
            kwargs.update(stop_strings=stops, tokenizer=self.tok)
        with self.lock, torch.no_grad():
            torch.manual_seed(int(params.get("seed") or 0))
            out = self.model.generate(ids, **kwargs)
        new = out.sequences[0, len(prompt_ids):].tolist()
        steps: list[dict[str, Any]] = []
        for tid, logits in zip(new, out.logits, strict=False):
            if tid == self.tok.eos_token_id:
                break
            logprobs = torch.log_softmax(logits[0].float(), dim=-1)
            step: dict[str, Any] = {"id": tid, "logprob": float(logprobs[tid])}
            if top_n:
                vals, idx = torch.topk(logprobs, top_n)
                step["top"] = [(int(i), float(v)) for v, i in zip(vals, idx, strict=True)]
            steps.append(step)
        text = self.tok.decode([s["id"] for s in steps], skip_special_tokens=True)
        finish = "stop" if len(steps) < max_tokens else "length"
        for stop in stops:
            if stop in text:
                text, finish = text[: text.index(stop)], "stop"
        return {"text": text, "steps": steps, "finish_reason": finish, "prompt_tokens": len(prompt_ids)}

    def chat_ids(self, messages: Any) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in (
                "system", "user", "assistant"):
                raise BadRequest("each message needs a role (system/user/assistant) and string content")
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if not isinstance(ids, list):
            ids = ids["input_ids"]
        return list(ids)

    def prompt_ids(self, prompt: Any) -> list[int]:
        if not isinstance(prompt, str):
            raise BadRequest("prompt must be a string")
        return self.tok(prompt).input_ids


def chat_response(model: LocalModel, body: dict[str, Any]) -> dict[str, Any]:
    res = model.generate(model.chat_ids(body.get("messages")), body)
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": res["text"]},
                              "finish_reason": res["finish_reason"]}
    if body.get("logprobs"):
        choice["logprobs"] = {"content": [
            {"token": model._token_str(s["id"]), "logprob": s["logprob"],
             "top_logprobs": [{"token": model._token_str(i), "logprob": v} for i, v in s.get("top", [])]}
            for s in res["steps"]
        ]}
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model.name, "choices": [choice],
            "usage": {"prompt_tokens": res["prompt_tokens"], "completion_tokens": len(res["steps"]),
                      "total_tokens": res["prompt_tokens"] + len(res["steps"])}}


def completion_response(model: LocalModel, body: dict[str, Any]) -> dict[str, Any]:
    n_top = body.get("logprobs")
    params = dict(body)
    params["top_logprobs"] = int(n_top) if n_top else 0
    res = model.generate(model.prompt_ids(body.get("prompt")), params)
    choice: dict[str, Any] = {"index": 0, "text": res["text"], "finish_reason": res["finish_reason"]}
    if n_top:
        choice["logprobs"] = {
            "tokens": [model._token_str(s["id"]) for s in res["steps"]],
            "token_logprobs": [s["logprob"] for s in res["steps"]],
            "top_logprobs": [{model._token_str(i): v for i, v in s.get("top", [])} for s in res["steps"]],
        }
    return {"id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "text_completion", "created": int(time.time()),
            "model": model.name, "choices": [choice],
            "usage": {"prompt_tokens": res["prompt_tokens"], "completion_tokens": len(res["steps"]),
                      "total_tokens": res["prompt_tokens"] + len(res["steps"])}}


def make_handler(model: LocalModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: the client records failures itself
            pass

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            elif self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model.name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise BadRequest("body must be a JSON object")
                if self.path == "/v1/chat/completions":
                    self._send(200, chat_response(model, body))
                elif self.path == "/v1/completions":
                    self._send(200, completion_response(model, body))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
            except (BadRequest, json.JSONDecodeError, ValueError) as err:
                self._send(400, {"error": {"message": str(err), "type": "invalid_request_error"}})
            except Exception as err:  # a server must answer, not die: report it as a 500
                self._send(500, {"error": {"message": f"{type(err).__name__}: {err}", "type": "server_error"}})

    return Handler


def serve(model_dir: str | Path, host: str = "127.0.0.1", port: int = 0, name: str | None = None,
          threads: int = 0) -> ThreadingHTTPServer:
    """Start serving in a background thread; returns the server (``server.server_address``)."""
    model = LocalModel(model_dir, name=name, threads=threads)
    server = ThreadingHTTPServer((host, port), make_handler(model))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


app = typer.Typer(add_completion=False, help="OpenAI-compatible server over a local causal LM.")


@app.command()
def main(
    model: Path = typer.Option(None, help="transformers model dir; default: SmolLM2-135M-Instruct from the user cache"),
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8008, help="0 picks a free port"),
    port_file: Path = typer.Option(None, help="write the bound port here once ready"),
    name: str = typer.Option(None, help="model name reported by the API"),
    threads: int = typer.Option(0, help="torch threads (0 = default)"),
) -> None:
    from core.local_lm import obtain_smollm2

    model_dir = model or obtain_smollm2()
    server = serve(model_dir, host, port, name, threads)
    bound = server.server_address[1]
    if port_file:
        port_file.write_text(str(bound))
    typer.echo(f"serving {model_dir} on http://{host}:{bound}/v1", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    app()
