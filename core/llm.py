"""Client for OpenAI-compatible LLM endpoints (vLLM, SGLang, our ``core.llm_server``).

What corpus-scale scoring needs from a client: a concurrency limit, timeouts, retries with
exponential backoff on the failures that retrying can fix (connection errors, timeouts,
429/5xx, garbage bodies) and none on those it cannot (other 4xx), an on-disk cache keyed by
(route, model, request) so a re-run costs nothing, and a record of every failure.
``map`` never raises for one bad request: it returns an ``LLMFailure`` in its place, so the
caller can mark that document unscored instead of losing it.

The client is picklable (datatrove workers and Spark executors each rebuild their pool).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import Field

from core.config import StrictModel
from core.errors import UserError
from core.shards import atomic_write_text

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class LLMConfig(StrictModel):
    base_url: str  # e.g. http://127.0.0.1:8008/v1
    model: str = "default"
    # name of the environment variable holding the API key (never the key itself in YAML)
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    backoff_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=10.0, ge=0)
    concurrency: int = Field(default=8, gt=0)
    cache_dir: str | None = "data/llm_cache"


@dataclass
class LLMResponse:
    raw: dict[str, Any]
    cached: bool = False

    @property
    def text(self) -> str:
        choice = self.raw["choices"][0]
        if "message" in choice:
            return choice["message"].get("content") or ""
        return choice.get("text") or ""

    def first_token_top_logprobs(self) -> dict[str, float]:
        """token -> logprob for the first generated position (chat or completions shape)."""
        lp = self.raw["choices"][0].get("logprobs") or {}
        if "content" in lp:  # chat
            content = lp.get("content") or []
            return {t["token"]: t["logprob"] for t in content[0].get("top_logprobs", [])} if content else {}
        tops = lp.get("top_logprobs") or []
        return dict(tops[0]) if tops else {}


@dataclass
class LLMFailure:
    url: str
    kind: str  # connection | timeout | http_<status> | bad_response
    message: str
    attempts: int

    def __str__(self) -> str:
        return f"{self.url}: {self.kind} after {self.attempts} attempt(s): {self.message}"


class LLMError(UserError):
    def __init__(self, failure: LLMFailure):
        super().__init__(str(failure))
        self.failure = failure


@dataclass
class _Attempt:
    response: dict[str, Any] | None = None
    kind: str = ""
    message: str = ""
    retry: bool = False


def _validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "body is not a JSON object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "no choices in the response"
    c = choices[0]
    if not isinstance(c.get("message", {}).get("content", ""), (str, type(None))) and "text" not in c:
        return "choice has neither message content nor text"
    return None


class LLMClient:
    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.base = cfg.base_url.rstrip("/")
        self.failures: list[LLMFailure] = []
        self.stats: Counter = Counter()
        self._build_transport()

    def _build_transport(self) -> None:
        self._lock = threading.Lock()
        # a proxy configured for the outside world must not intercept a loopback server
        host = urlparse(self.base).hostname or ""
        handlers = [urllib.request.ProxyHandler({})] if host in ("127.0.0.1", "localhost", "::1") else []
        self._opener = urllib.request.build_opener(*handlers)

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"], state["_opener"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._build_transport()

    # -- cache --------------------------------------------------------------------------------
    def _cache_path(self, route: str, payload: dict[str, Any]) -> Path | None:
        if not self.cfg.cache_dir:
            return None
        key = json.dumps({"route": route, "base": self.base, "payload": payload}, sort_keys=True)
        digest = hashlib.sha256(key.encode()).hexdigest()
        return Path(self.cfg.cache_dir) / digest[:2] / f"{digest}.json"

    @staticmethod
    def _cache_get(path: Path | None) -> dict[str, Any] | None:
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None  # a torn cache file is a miss, never an error

    @staticmethod
    def _cache_put(path: Path | None, body: dict[str, Any]) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(body))

    # -- transport ----------------------------------------------------------------------------
    def _attempt(self, url: str, payload: dict[str, Any]) -> _Attempt:
        headers = {"Content-Type": "application/json"}
        if self.cfg.api_key_env and os.environ.get(self.cfg.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.cfg.api_key_env]}"
        req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        try:
            with self._opener.open(req, timeout=self.cfg.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode("utf-8", "replace") if err.fp else ""
            return _Attempt(kind=f"http_{err.code}", message=detail or str(err.reason),
                            retry=err.code in RETRYABLE_STATUS)
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
            reason = getattr(err, "reason", err)
            kind = "timeout" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "connection"
            return _Attempt(kind=kind, message=str(reason), retry=True)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _Attempt(kind="bad_response", message=f"not JSON: {raw[:80]!r}", retry=True)
        problem = _validate(body)
        if problem:
            return _Attempt(kind="bad_response", message=problem, retry=True)
        return _Attempt(response=body)

    def request(self, route: str, payload: dict[str, Any]) -> LLMResponse | LLMFailure:
        payload = {"model": self.cfg.model, **payload}
        cache = self._cache_path(route, payload)
        hit = self._cache_get(cache)
        if hit is not None:
            with self._lock:
                self.stats["cache_hits"] += 1
            return LLMResponse(hit, cached=True)
        url = f"{self.base}/{route}"
        attempt = _Attempt()
        for n in range(self.cfg.max_retries + 1):
            with self._lock:
                self.stats["requests"] += 1
                if n:
                    self.stats["retries"] += 1
            attempt = self._attempt(url, payload)
            if attempt.response is not None:
                self._cache_put(cache, attempt.response)
                return LLMResponse(attempt.response)
            if not attempt.retry or n == self.cfg.max_retries:
                break
            delay = min(self.cfg.backoff_max_s, self.cfg.backoff_s * 2**n)
            time.sleep(delay * (0.5 + random.random() / 2))
        failure = LLMFailure(url, attempt.kind, attempt.message, n + 1)
        with self._lock:
            self.failures.append(failure)
            self.stats["failures"] += 1
        return failure

    # -- API ----------------------------------------------------------------------------------
    def chat(self, messages: list[dict[str, str]], **params: Any) -> LLMResponse:
        res = self.request("chat/completions", {"messages": messages, **params})
        if isinstance(res, LLMFailure):
            raise LLMError(res)
        return res

    def complete(self, prompt: str, **params: Any) -> LLMResponse:
        res = self.request("completions", {"prompt": prompt, **params})
        if isinstance(res, LLMFailure):
            raise LLMError(res)
        return res

    def map(self, route: str, payloads: list[dict[str, Any]]) -> list[LLMResponse | LLMFailure]:
        """Run requests with at most ``concurrency`` in flight; results in input order."""
        if not payloads:
            return []
        if len(payloads) == 1 or self.cfg.concurrency == 1:
            return [self.request(route, p) for p in payloads]
        with ThreadPoolExecutor(max_workers=min(self.cfg.concurrency, len(payloads))) as pool:
            return list(pool.map(lambda p: self.request(route, p), payloads))

