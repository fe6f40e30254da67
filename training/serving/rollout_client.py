"""Token-in/token-out calls to a rollout server: ours, SGLang or vLLM, one result shape.

``generate`` returns ``Generation`` (token ids, their logprobs, the weight version of each token,
finish reason) or a ``CallFailure`` — a reply that does not have that shape is ``garbled``, so a
broken server costs a retry, never a crash deep inside the trainer.

* ``ours`` / ``sglang``: ``POST /generate`` with ``input_ids`` and ``return_logprob``
  (``meta_info.output_token_logprobs``); SGLang reports no per-token versions, so every token
  gets the reply's ``weight_version`` (or the version the caller last pushed).
* ``vllm``: ``POST /v1/completions`` with the prompt as token ids, ``logprobs: 0`` and
  ``return_tokens_as_token_ids`` (tokens come back as ``token_id:N``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training.serving.http_json import CallFailure, call


@dataclass
class Generation:
    output_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: str  # stop | length | abort


def _garbled(url: str, why: str) -> CallFailure:
    return CallFailure(url, "garbled", why)


def _from_generate(url: str, res: Any, default_version: int) -> Generation | CallFailure:
    try:
        meta = res["meta_info"]
        ids = [int(t) for t in res["output_ids"]]
        lps = [float(x[0]) for x in meta["output_token_logprobs"]]
        reason = meta["finish_reason"]
        reason = reason["type"] if isinstance(reason, dict) else str(reason)
        version = int(meta.get("weight_version", default_version) or default_version)
        versions = [int(v) for v in meta.get("token_weight_versions") or [version] * len(ids)]
    except (KeyError, TypeError, ValueError, IndexError) as err:
        return _garbled(url, f"not a /generate reply ({type(err).__name__}: {err})")
    if not (len(ids) == len(lps) == len(versions)):
        return _garbled(url, "output_ids, logprobs and versions differ in length")
    return Generation(ids, lps, versions, reason)


def _from_vllm(url: str, res: Any, default_version: int) -> Generation | CallFailure:
    try:
        choice = res["choices"][0]
        lp = choice["logprobs"]
        ids = [int(str(t).removeprefix("token_id:")) for t in lp["tokens"]]
        lps = [float(x) for x in lp["token_logprobs"]]
        reason = choice.get("finish_reason") or "length"
    except (KeyError, TypeError, ValueError, IndexError) as err:
        return _garbled(url, f"not a completions reply with token ids ({type(err).__name__}: {err})")
    if len(ids) != len(lps):
        return _garbled(url, "tokens and logprobs differ in length")
    return Generation(ids, lps, [default_version] * len(ids), reason)


def generate(endpoint: str, backend: str, prompt_ids: list[int], sampling: dict[str, Any], rid: str,
             timeout_s: float, weight_version: int = 0, model: str = "default") -> Generation | CallFailure:
    base = endpoint.rstrip("/")
    if backend == "vllm":
        url = f"{base}/v1/completions"
        body = {"model": model, "prompt": prompt_ids, "max_tokens": sampling["max_tokens"],
                "temperature": sampling["temperature"], "top_p": sampling["top_p"], "logprobs": 0,
                "return_tokens_as_token_ids": True, "stop_token_ids": sampling.get("stop_token_ids") or None,
                "skip_special_tokens": False}
        res = call(url, body, timeout_s)
        return res if isinstance(res, CallFailure) else _from_vllm(url, res, weight_version)
    url = f"{base}/generate"
    sp = {"max_new_tokens": sampling["max_tokens"], "temperature": sampling["temperature"],
          "top_p": sampling["top_p"]}
    if sampling.get("stop_token_ids") is not None:  # [] = no stop tokens (run to max_tokens)
        sp["stop_token_ids"] = sampling["stop_token_ids"]
    res = call(url, {"input_ids": prompt_ids, "sampling_params": sp, "return_logprob": True, "rid": rid},
               timeout_s)
    return res if isinstance(res, CallFailure) else _from_generate(url, res, weight_version)


def update_weights(endpoint: str, backend: str, model_path: str, version: int, abort_inflight: bool,
                   timeout_s: float = 120.0) -> dict[str, Any] | CallFailure:
    base = endpoint.rstrip("/")
    if backend == "vllm":  # vLLM has no standard route; its RLHF examples use collective RPCs
        return CallFailure(base, "unsupported", "vLLM weight updates go through its own worker extension")
    route = "update_weights" if backend == "ours" else "update_weights_from_disk"
    return call(f"{base}/{route}", {"model_path": model_path, "weight_version": version,
                                    "abort_all_requests": abort_inflight}, timeout_s)


def abort(endpoint: str, rid: str | None = None, timeout_s: float = 10.0) -> Any:
    return call(f"{endpoint.rstrip('/')}/abort_request", {"rid": rid} if rid else {}, timeout_s)
