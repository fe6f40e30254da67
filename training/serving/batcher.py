"""The continuous batcher behind the rollout server (an inference engine's core, named apart from
``core.engine``'s engines, which say where data work runs): batching in chunks over ``training.serving.sampler``.

Requests arrive from many HTTP threads; one loop thread serves them. Each *round* takes every
live request (new ones join at the next round), asks the sampler for up to ``chunk_tokens`` more
tokens of each in one batched call (prompt + tokens so far as the prompt, per-row params), and
finishes the rows that stopped or reached their budget. Between rounds the loop:

* applies a weight update (``update_weights``) — requests still in flight continue on the new
  weights (a *partial rollout*); every token records the ``weight_version`` that sampled it, so a
  trainer can mask old-version tokens — or, with ``abort_inflight``, ends them as ``abort``;
* honours ``abort(rid)``: the request returns what it has with ``finish_reason: abort``.

A chunk re-reads the request's tokens as prompt (the sampler's latent cache lives for one
call), which costs a prefill per chunk but keeps ONE sampler and lets weights change between
chunks exactly where the version tags say they did.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from safetensors.torch import load, load_file

from core.errors import InputError, UserError
from training.policy import Policy, as_policy
from training.serving.sampler import SamplingParams, sample


@dataclass
class Request:
    rid: str
    prompt: list[int]
    params: SamplingParams
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    abort_requested: bool = False


class ContinuousBatcher:
    def __init__(self, model: Policy, weight_version: int = 0, chunk_tokens: int = 16, max_batch: int = 32,
                 seed: int = 0, log: Callable[[str], None] = print):
        self.model = as_policy(model).eval()  # any policy (training.policy); a bare GLMModel is wrapped
        self.weight_version = weight_version
        self.chunk_tokens = chunk_tokens
        self.max_batch = max_batch
        self.log = log
        self.generator = torch.Generator().manual_seed(seed)
        self._cond = threading.Condition()
        self._pending: list[Request] = []
        self._active: list[Request] = []
        self._update: tuple[dict[str, torch.Tensor], int, bool] | None = None
        self._update_done = threading.Event()
        self._ids = itertools.count()
        self._stop = False
        self.stats = {"requests": 0, "tokens": 0, "rounds": 0, "aborted": 0, "updates": 0}
        self._thread = threading.Thread(target=self._loop, daemon=True, name="batcher")
        self._thread.start()

    # -- API used by the HTTP routes ---------------------------------------------------------------
    def generate(self, prompt: list[int], params: SamplingParams, rid: str | None = None,
                 timeout_s: float | None = None) -> Request:
        params.check()
        vocab = self.model.vocab_size
        if not prompt or not all(isinstance(t, int) and 0 <= t < vocab for t in prompt):
            raise UserError(f"input_ids must be a non-empty list of token ids in [0, {vocab})")
        req = Request(rid or f"req-{next(self._ids)}", list(prompt), params)
        with self._cond:
            self._pending.append(req)
            self.stats["requests"] += 1
            self._cond.notify_all()
        if not req.done.wait(timeout_s):
            self.abort(req.rid)
            req.done.wait()
        return req

    def abort(self, rid: str | None = None) -> int:
        """Abort one request (or all when ``rid`` is None); returns how many were marked."""
        with self._cond:
            hit = [r for r in self._pending + self._active if rid is None or r.rid == rid]
            for r in hit:
                r.abort_requested = True
            self._cond.notify_all()
        return len(hit)

    def update_weights(self, state: dict[str, torch.Tensor], version: int, abort_inflight: bool = False,
                       timeout_s: float = 120.0) -> None:
        """Swap weights between rounds; returns once the new weights serve."""
        bad = self.model.weight_mismatches(state)
        if bad:
            raise UserError(f"weights do not match the served model: {'; '.join(bad[:5])}")
        with self._cond:
            self._update_done.clear()
            self._update = (state, version, abort_inflight)
            self._cond.notify_all()
        if not self._update_done.wait(timeout_s):
            raise UserError("weight update not applied in time")

    def inflight(self) -> int:
        with self._cond:
            return len(self._pending) + len(self._active)

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=10)

    # -- the loop ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._stop or self._pending or self._active or self._update):
                    self._cond.wait()
                if self._stop:
                    for r in self._pending + self._active:
                        self._finish(r, "abort")
                    return
                if self._update is not None:
                    self._apply_update()
                room = self.max_batch - len(self._active)
                self._active += self._pending[:room]
                self._pending = self._pending[room:]
                for r in [r for r in self._active if r.abort_requested]:
                    self._finish(r, "abort")
                batch = list(self._active)
            if batch:
                self._round(batch)

    def _apply_update(self) -> None:
        state, version, abort_inflight = self._update
        self.model.load_weights(state)
        self.weight_version = version
        self.stats["updates"] += 1
        if abort_inflight:
            for r in self._pending + self._active:
                self._finish(r, "abort")
        self._update = None
        self._update_done.set()

    def _round(self, batch: list[Request]) -> None:
        params = [replace(r.params, max_tokens=min(self.chunk_tokens, r.params.max_tokens - len(r.tokens)))
                  for r in batch]
        version = self.weight_version
        outs = sample(self.model, [r.prompt + r.tokens for r in batch], params, generator=self.generator)
        with self._cond:
            self.stats["rounds"] += 1
            for r, out in zip(batch, outs, strict=True):
                r.tokens += out.tokens
                r.logprobs += out.logprobs
                r.versions += [version] * len(out.tokens)
                self.stats["tokens"] += len(out.tokens)
                if out.finish_reason == "stop":
                    self._finish(r, "stop")
                elif len(r.tokens) >= r.params.max_tokens:
                    self._finish(r, "length")

    def _finish(self, r: Request, reason: str) -> None:
        """Caller holds the lock."""
        r.finish_reason = reason
        self.stats["aborted"] += reason == "abort"
        if r in self._active:
            self._active.remove(r)
        if r in self._pending:
            self._pending.remove(r)
        r.done.set()


def read_weights(model_path: str | None = None, tensors_b64: str | None = None) -> dict[str, torch.Tensor]:
    """Weights from a checkpoint directory / safetensors file, or pushed safetensors bytes."""
    if tensors_b64 is not None:
        try:
            return load(base64.b64decode(tensors_b64))
        except Exception as err:  # noqa: BLE001 - any decode failure is the sender's bad input
            raise UserError(f"pushed tensors are not base64 safetensors: {err}") from None
    if model_path is None:
        raise UserError("give model_path (checkpoint dir or .safetensors) or tensors_b64")
    path = Path(model_path)
    file = path / "model.safetensors" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"{model_path}: no model.safetensors")
    return load_file(file)
