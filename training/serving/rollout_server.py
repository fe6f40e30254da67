"""Rollout server over any policy — our GLM-5-shaped model or a transformers causal LM
(``training.policy``) — OpenAI-compatible and token-in/token-out, with the policy's own chat template.

Routes (the subset of SGLang's API an RL system uses, with its field names, so the orchestrator
and external agent frameworks can point at SGLang or vLLM instead):

* ``POST /generate`` — ``{"input_ids", "sampling_params": {"max_new_tokens", "temperature",
  "top_p", "stop_token_ids"}, "rid"}`` -> ``{"output_ids", "text", "meta_info": {"finish_reason":
  {"type"}, "output_token_logprobs": [[logprob, id, null], ...], "weight_version",
  "token_weight_versions", "prompt_tokens", "completion_tokens"}}``
* ``POST /v1/completions`` (prompt text or token ids, ``logprobs``, vLLM's
  ``return_tokens_as_token_ids``) and ``POST /v1/chat/completions``
  (GLM-5 chat template; ``logprobs: true``; the reply parsed back into ``reasoning_content`` and
  ``tool_calls``); ``n`` samples per prompt; refused (400), never ignored: ``stop`` strings (use
  ``stop_token_ids``), ``stream``, and text with words a word-level vocabulary lacks;
  ``top_logprobs`` carry the sampled token only
* ``POST /update_weights`` (alias ``/update_weights_from_disk``): ``{"model_path"}`` (a checkpoint
  directory or .safetensors) or ``{"tensors_b64"}`` (pushed safetensors bytes), ``weight_version``,
  ``abort_all_requests``
* ``POST /abort`` (alias ``/abort_request``): ``{"rid"}`` or ``{}`` for all
* ``GET /health`` (with ``weight_version``), ``GET /v1/models``, ``GET /tokenizer`` (its
  ``tokenizer.json``, so an agent gateway in front renders prompts exactly as it does)

``python -m training.rl serve --checkpoint CKPT --port P``: CKPT is ours or a Hugging Face directory
(``training.policy.checkpoint_kind``).
"""

from __future__ import annotations

import base64
import json
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import typer

from core.cli import user_errors
from core.errors import InputError, UserError
from training.policy import ChatCodec, Policy, checkpoint_kind, load_policy
from training.policy.codec import Codec
from training.serving.batcher import ContinuousBatcher, read_weights
from training.serving.faults import ServerFaults
from training.serving.http_json import HttpError, exit_with_parent, register_with, serve_json
from training.serving.sampler import SamplingParams


def load_served_model(checkpoint: str | Path) -> tuple[Policy, int, dict[str, Any]]:
    """The policy of a checkpoint (ours or a Hugging Face directory) and its weight version
    (``trainer.json``'s, 0 for a plain HF directory)."""
    _, step = checkpoint_kind(checkpoint)
    meta_file = step / "trainer.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else {}
    return load_policy(step), int(meta.get("weight_version", 0)), meta


def _params(sp: dict[str, Any], default_stops: list[int]) -> SamplingParams:
    try:
        return SamplingParams(
            temperature=float(sp.get("temperature", 1.0)),
            top_p=float(sp.get("top_p", 1.0)),
            max_tokens=int(sp.get("max_new_tokens", sp.get("max_tokens", 16))),
            stop_token_ids=tuple(sp["stop_token_ids"] if sp.get("stop_token_ids") is not None else default_stops),
        ).check()
    except (TypeError, ValueError, UserError) as err:
        raise HttpError(400, f"bad sampling params: {err}") from None


class RolloutServer:
    def __init__(self, batcher: ContinuousBatcher, codec: ChatCodec, name: str = "glm5-tiny", timeout_s: float = 600.0):
        self.batcher, self.codec, self.name, self.timeout_s = batcher, codec, name, timeout_s

    def _run(self, ids: list[int], params: SamplingParams, rid: str | None):
        try:
            return self.batcher.generate(ids, params, rid, timeout_s=self.timeout_s)
        except UserError as err:
            raise HttpError(400, str(err)) from None

    def _encode(self, text: str) -> list[int]:
        try:
            return self.codec.encode(text)
        except UserError as err:
            raise HttpError(400, str(err)) from None

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = body.get("input_ids")
        if ids is None and isinstance(body.get("text"), str):
            ids = self._encode(body["text"])
        if not isinstance(ids, list):
            raise HttpError(400, "input_ids must be a list of token ids (or give text)")
        req = self._run(ids, _params(body.get("sampling_params") or {}, self.codec.stop_ids), body.get("rid"))
        return {"text": self.codec.decode(req.tokens), "output_ids": req.tokens,
                "meta_info": {"id": req.rid, "finish_reason": {"type": req.finish_reason},
                              "prompt_tokens": len(ids), "completion_tokens": len(req.tokens),
                              "output_token_logprobs": [[lp, t, None] for lp, t in zip(req.logprobs, req.tokens,
                                                                                       strict=True)],
                              "weight_version": self.batcher.weight_version,
                              "token_weight_versions": req.versions}}

    def _run_n(self, body: dict[str, Any], ids: list[int], params: SamplingParams) -> list:
        """``n`` samples of one prompt (OpenAI's ``n``: agent frameworks ask for a group this way),
        decoded together by the continuous batcher."""
        n = body.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
            raise HttpError(400, "n must be an integer in [1, 64]")
        if body.get("stop"):  # a string stop cannot be honoured token-exactly: refuse, never ignore
            raise HttpError(400, "stop strings are not supported; use stop_token_ids")
        if body.get("stream"):  # a client asking for server-sent events cannot read one JSON reply
            raise HttpError(400, "stream is not supported; send stream: false")
        if n == 1:
            return [self._run(ids, params, None)]
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(lambda _: self._run(ids, params, None), range(n)))

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            ids = self._encode(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            ids = prompt
        else:
            raise HttpError(400, "prompt must be a string or a list of token ids")
        choices = []
        reqs = self._run_n(body, ids, _params(body, []))
        for i, req in enumerate(reqs):
            choice: dict[str, Any] = {"index": i, "text": self.codec.decode(req.tokens),
                                      "finish_reason": req.finish_reason}
            if body.get("logprobs") is not None:  # top_logprobs: the sampled token only
                # vLLM's return_tokens_as_token_ids: "token_id:N" strings, so a client configured for
                # vLLM (rollout.backend: vllm) reads the exact ids from this server too
                toks = [f"token_id:{t}" if body.get("return_tokens_as_token_ids") else self.codec.token(t)
                        for t in req.tokens]
                choice["logprobs"] = {"tokens": toks, "token_logprobs": req.logprobs, "token_ids": req.tokens,
                                      "top_logprobs": [{t: lp} for t, lp in zip(toks, req.logprobs, strict=True)]}
            choices.append(choice)
        return self._envelope("text_completion", "cmpl", choices, len(ids), reqs)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            ids = self.codec.chat_prompt(body.get("messages"), thinking=bool(body.get("thinking", False)),
                                         tools=body.get("tools") or None)
        except UserError as err:
            raise HttpError(400, str(err)) from None
        choices = []
        reqs = self._run_n(body, ids, _params(body, self.codec.stop_ids))
        for i, req in enumerate(reqs):
            choice: dict[str, Any] = {"index": i, "message": self.codec.chat_reply(req.tokens),
                                      "finish_reason": req.finish_reason}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": self.codec.token(t), "logprob": lp, "top_logprobs": []}
                                                  for t, lp in zip(req.tokens, req.logprobs, strict=True)]}
            choices.append(choice)
        return self._envelope("chat.completion", "chatcmpl", choices, len(ids), reqs)

    def _envelope(self, obj: str, prefix: str, choices: list[dict], n_prompt: int, reqs: list) -> dict[str, Any]:
        completion = sum(len(r.tokens) for r in reqs)
        return {"id": f"{prefix}-{uuid.uuid4().hex[:12]}", "object": obj, "created": int(time.time()),
                "model": self.name, "choices": choices, "weight_version": self.batcher.weight_version,
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": completion,
                          "total_tokens": n_prompt + completion}}

    def update_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        version = body.get("weight_version")
        if not isinstance(version, int):
            raise HttpError(400, "weight_version (int) is required")
        try:
            state = read_weights(body.get("model_path"), body.get("tensors_b64"))
            self.batcher.update_weights(state, version, bool(body.get("abort_all_requests", False)))
        except UserError as err:
            raise HttpError(400, str(err)) from None
        return {"success": True, "weight_version": version}

    def tokenizer(self, body: dict[str, Any]) -> dict[str, Any]:
        # the agent gateway renders prompts with this: GLM-5's template over tokenizer.json, or a
        # Hugging Face model's own tokenizer files (its chat template in them) and end-of-turn ids
        if isinstance(self.codec, Codec):
            return {"tokenizer": self.codec.tok.to_str()}
        with tempfile.TemporaryDirectory() as d:
            self.codec.save(Path(d))
            # base64: a tokenizer may save a binary file (a SentencePiece model) beside its JSON ones
            files = {f.name: base64.b64encode(f.read_bytes()).decode() for f in sorted(Path(d).iterdir()) if f.is_file()}
        return {"hf_files": files, "stop_ids": list(self.codec.stop_ids)}

    def routes(self) -> dict[str, Any]:
        return {
            "GET /health": lambda b: {"status": "ok", "weight_version": self.batcher.weight_version,
                                      "inflight": self.batcher.inflight(), "model": self.name},
            "GET /v1/models": lambda b: {"object": "list", "data": [{"id": self.name, "object": "model"}]},
            "GET /tokenizer": self.tokenizer,  # for a gateway in front
            "GET /stats": lambda b: dict(self.batcher.stats, weight_version=self.batcher.weight_version),
            "POST /generate": self.generate,
            "POST /v1/completions": self.completions,
            "POST /v1/chat/completions": self.chat,
            "POST /update_weights": self.update_weights,
            "POST /update_weights_from_disk": self.update_weights,
            "POST /abort": lambda b: {"aborted": self.batcher.abort(b.get("rid"))},
            "POST /abort_request": lambda b: {"aborted": self.batcher.abort(b.get("rid"))},
        }


app = typer.Typer(add_completion=False, help="Rollout server (OpenAI-compatible + token-in/out) over a checkpoint.")


@app.command()
@user_errors(sigterm_unwinds=True)
def main(
    checkpoint: Path = typer.Option(..., help="checkpoint: ours (model.safetensors + trainer.json) or a Hugging Face directory"),
    port: int = typer.Option(8010, help="0 picks a free port"),
    host: str = typer.Option("127.0.0.1"),
    tokenizer: Path = typer.Option(None, help="tokenizer.json for our model; default: the checkpoint's"),
    threads: int = typer.Option(1, help="torch threads"),
    chunk_tokens: int = typer.Option(16, help="tokens per continuous-batching round"),
    max_batch: int = typer.Option(32, help="requests decoded together"),
    seed: int = typer.Option(0),
    register: str = typer.Option(None, help="orchestrator URL to register with once ready"),
    key: str = typer.Option(None, help="slot key the orchestrator launched this server under"),
    port_file: Path = typer.Option(None, help="write the bound port here once ready"),
    slow_prob: float = typer.Option(0.0, help="fault injection: share of /generate replies delayed by --slow-s"),
    slow_s: float = typer.Option(0.0),
    garble_prob: float = typer.Option(0.0, help="fault injection: share of /generate replies that are not JSON"),
    fault_log: str = typer.Option(None, help="append one JSON line per injected fault here"),
) -> None:
    if key:  # launched by an orchestrator: gone with it
        exit_with_parent()
    if threads:
        torch.set_num_threads(threads)
    model, version, _ = load_served_model(checkpoint)
    codec = Codec.load(tokenizer) if tokenizer else model.codec
    if codec is None:
        raise InputError(f"{checkpoint}: no tokenizer.json beside the weights; pass --tokenizer")
    batcher = ContinuousBatcher(model, version, chunk_tokens=chunk_tokens, max_batch=max_batch, seed=seed)
    routes = RolloutServer(batcher, codec).routes()
    faults = ServerFaults(slow_prob, slow_s, garble_prob, fault_log, seed, who="rollout")
    if faults.active:
        routes["POST /generate"] = faults.wrap(routes["POST /generate"])
    server = serve_json(routes, host, port)
    bound = server.server_address[1]
    endpoint = f"http://{host}:{bound}"
    if port_file:
        port_file.write_text(str(bound))
    if register:
        res = register_with(register, {"key": key, "role": "rollout", "endpoint": endpoint, "capacity": max_batch})
        typer.echo(f"registered with {register}: {res}", err=True)
    typer.echo(f"serving {checkpoint} (weight_version {version}) on {endpoint}", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        batcher.stop()
        server.shutdown()
