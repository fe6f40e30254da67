"""Client for OpenAI-compatible LLM endpoints (vLLM, SGLang, our ``core.llm_server``).

What corpus-scale scoring needs from a client: a concurrency limit, timeouts, retries with
exponential backoff on the failures that retrying can fix (connection errors, timeouts,
429/5xx, garbage or truncated bodies) and none on those it cannot (other 4xx), a server's
Retry-After honoured (up to ``retry_after_max_s``), one deadline per attempt (a socket timeout
alone does not stop a server that trickles bytes), a bound on body size, an on-disk cache keyed
by (route, model, request) so a re-run costs nothing, and a record of every failure (each failed
attempt counted by kind in ``stats``, each failed request kept in ``failures``).
``map`` never raises for one bad request: it returns an ``LLMFailure`` in its place, so the
caller can mark that document unscored instead of losing it.

The client is picklable (datatrove workers and Spark executors each rebuild their pool).
"""

from __future__ import annotations

import hashlib
import http.client
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

from core.cache import cache_field
from core.config import StrictModel
from core.errors import UserError
from core.io import atomic_write_text

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
    cache_dir: str | None = cache_field("llm_cache")  # None: no answer cache
    # a 429/503's Retry-After is honoured up to this many seconds (a server asking for an hour
    # is treated as failing, not waited for)
    retry_after_max_s: float = Field(default=60.0, ge=0)
    # a larger body is a bad response, not a memory blow-up
    max_response_bytes: int = Field(default=64 * 2**20, gt=0)


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
    kind: str  # connection | timeout | truncated | http_<status> | bad_response
    message: str
    attempts: int

    def __str__(self) -> str:
        return f"{self.url}: {self.kind} after {self.attempts} attempt(s): {self.message}"


class _TooLarge(Exception):
    pass


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
    retry_after_s: float | None = None  # what the server asked for (429/503 Retry-After)


def _validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "body is not a JSON object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "no choices in the response"
    c = choices[0]
    message = c.get("message")
    if message is not None:
        if not isinstance(message, dict) or not isinstance(message.get("content", ""), (str, type(None))):
            return "choice message is not an object with string content"
    elif not isinstance(c.get("text"), str):
        return "choice has neither message content nor text"
    if c.get("logprobs") is not None and not isinstance(c["logprobs"], dict):
        return "choice logprobs is not an object"
    return None


def _retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks for (delta-seconds or an HTTP date), None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
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
    def _read_body(self, resp, deadline: float) -> bytes:
        """The whole body within the attempt's deadline: a socket timeout bounds each read, not a
        server that trickles a byte at a time; and within ``max_response_bytes``."""
        chunks, size = [], 0
        declared = resp.headers.get("Content-Length", "") if resp.headers else ""
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"body not complete within {self.cfg.timeout_s:g}s")
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not chunk:
                body = b"".join(chunks)
                # read1 returns b"" when the server closes early, where read() would have raised
                if declared.isdigit() and len(body) < int(declared):
                    raise http.client.IncompleteRead(body, int(declared) - len(body))
                return body
            size += len(chunk)
            if size > self.cfg.max_response_bytes:
                raise _TooLarge(f"body over max_response_bytes={self.cfg.max_response_bytes}")
            chunks.append(chunk)

    def _attempt(self, url: str, payload: dict[str, Any]) -> _Attempt:
        headers = {"Content-Type": "application/json"}
        if self.cfg.api_key_env and os.environ.get(self.cfg.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.cfg.api_key_env]}"
        req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        deadline = time.monotonic() + self.cfg.timeout_s
        try:
            with self._opener.open(req, timeout=self.cfg.timeout_s) as resp:
                raw = self._read_body(resp, deadline)
        except urllib.error.HTTPError as err:
            try:
                detail = err.read()[:300].decode("utf-8", "replace") if err.fp else ""
            except (OSError, http.client.HTTPException):
                detail = ""
            return _Attempt(kind=f"http_{err.code}", message=detail or str(err.reason),
                            retry=err.code in RETRYABLE_STATUS,
                            retry_after_s=_retry_after(err.headers.get("Retry-After") if err.headers else None))
        except _TooLarge as err:
            return _Attempt(kind="bad_response", message=str(err), retry=False)
        except http.client.IncompleteRead as err:  # the server closed before Content-Length bytes
            return _Attempt(kind="truncated", message=f"{len(err.partial)} bytes of the body arrived", retry=True)
        except http.client.HTTPException as err:  # a status line or headers that are not HTTP
            return _Attempt(kind="bad_response", message=f"{type(err).__name__}: {err}"[:300], retry=True)
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
            reason = getattr(err, "reason", err)
            kind = "timeout" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "connection"
            return _Attempt(kind=kind, message=str(reason), retry=True)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
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
            with self._lock:  # every failed attempt is counted by kind, not only the last
                self.stats[f"attempt_{attempt.kind}"] += 1
            if attempt.retry_after_s is not None and attempt.retry_after_s > self.cfg.retry_after_max_s:
                attempt.message += f" (Retry-After {attempt.retry_after_s:g}s > retry_after_max_s)"
                break
            if not attempt.retry or n == self.cfg.max_retries:
                break
            delay = min(self.cfg.backoff_max_s, self.cfg.backoff_s * 2**n)
            delay *= 0.5 + random.random() / 2
            if attempt.retry_after_s is not None:  # the server knows when it can take more
                delay = max(delay, attempt.retry_after_s)
            time.sleep(delay)
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

