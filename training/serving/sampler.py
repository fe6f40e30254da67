"""Batched token-in/token-out sampling from any policy (``training.policy``): our GLM-5-shaped
model with its MLA latent KV cache, or a transformers causal LM with its own KV cache.

API (what a rollout server calls)::

    from training.serving.sampler import SamplingParams, sample
    outs = sample(policy, [[5, 9, 2], [7]], SamplingParams(temperature=1.0, top_p=0.95,
                  max_tokens=64, stop_token_ids=[user_id, observation_id]), generator=g)
    outs[0].tokens      # the sampled token ids (a stop token, when hit, is the last one)
    outs[0].logprobs    # one float per sampled token (see below)
    outs[0].finish_reason  # "stop" (a stop token was sampled) or "length" (max_tokens reached)

``params`` may be one ``SamplingParams`` for the whole batch or one per prompt (a server
batching requests with different settings). Prompts are lists of token ids of any lengths
(at least one token each): they are left-padded into one batch, the pads hidden by a key mask
and RoPE positions counted per row, so every row sees exactly what it would see alone. One
prefill over the padded prompts fills the latent caches (equal prompts, such as a GRPO group's,
are prefilled once and their cache rows repeated), then one token per live row per
step; rows that finish leave the batch (their cache rows are dropped), so a long tail does not
keep paying for finished rows.

**Which logprobs.** ``logprobs[t]`` is ``log softmax(logits / temperature)[token]`` — the
temperature-scaled distribution *before* top-p truncation. That is what a trainer recomputes
from its own forward pass (``training.rl.algo.losses.token_logprobs`` with the same temperature),
so rollout and trainer logprobs of the same weights agree up to float error, and truncated
importance sampling corrects only genuine mismatch. With ``temperature == 0`` (greedy) the
logprobs are of the untempered distribution. ``sampling_logprobs[t]`` is the log-probability
under the distribution actually sampled from (tempered, top-p truncated and renormalised;
0 for greedy): equal to ``logprobs`` when ``top_p == 1``.

Token-in/token-out: the caller trains on exactly ``prompt + tokens``; nothing is decoded and
re-encoded here. The model is put in eval mode for the call (MoE expert loads are then not
accumulated) and restored afterwards. Tensors are made on the model's device; a ``generator``
must live there too (``torch.Generator(device=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from core.errors import UserError
from training.policy import Policy, as_policy


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens with mass >= top_p
    max_tokens: int = 64
    stop_token_ids: Sequence[int] = ()

    def check(self) -> SamplingParams:
        if self.temperature < 0:
            raise UserError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise UserError(f"max_tokens must be >= 1, got {self.max_tokens}")
        return self


@dataclass
class Completion:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # tempered, before top-p (the trainer's)
    sampling_logprobs: list[float] = field(default_factory=list)  # of the truncated distribution sampled
    finish_reason: str = "length"  # "stop" | "length"


def _filter_top_p(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Zero the tail outside each row's nucleus (the top token always stays; top_p = 1 keeps
    every token, although a float32 cumsum over a large vocabulary can pass 1 before the tail)."""
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(-1) - sorted_p  # mass strictly above each token
    keep_sorted = (before < top_p[:, None]) | (top_p[:, None] >= 1)
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return probs * keep


def _pick(
    logits: torch.Tensor, temps: torch.Tensor, top_p: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens, logprobs, sampling logprobs), each [B], as
    documented above."""
    logits = logits.float()
    greedy = temps == 0
    scaled = logits / torch.where(greedy, torch.ones_like(temps), temps)[:, None]
    logp = scaled.log_softmax(-1)
    probs = _filter_top_p(logp.exp(), top_p)
    drawn = torch.multinomial(probs, 1, generator=generator)[:, 0]
    tokens = torch.where(greedy, logits.argmax(-1), drawn)
    picked = probs.gather(-1, tokens[:, None])[:, 0] / probs.sum(-1)
    sampling = torch.where(greedy, torch.zeros_like(picked), picked.log())
    return tokens, logp.gather(-1, tokens[:, None])[:, 0], sampling


@torch.no_grad()
def sample(
    model: Policy,
    prompts: Sequence[Sequence[int]],
    params: SamplingParams | Sequence[SamplingParams],
    generator: torch.Generator | None = None,
) -> list[Completion]:
    """Complete every prompt; see the module docstring for the contract. ``model``: a policy, or
    a bare ``GLMModel``."""
    model = as_policy(model)
    n = len(prompts)
    if n == 0:
        return []
    plist = [params] * n if isinstance(params, SamplingParams) else list(params)
    if len(plist) != n:
        raise UserError(f"{len(plist)} sampling params for {n} prompts")
    for p in plist:
        p.check()
    for i, prompt in enumerate(prompts):
        model.check_prompt(i, prompt)

    was_training = model.training
    model.eval()
    try:
        return _sample(model, prompts, plist, generator)
    finally:
        model.train(was_training)


def _prefill(model: Policy, prompts: list[tuple[int, ...]], dev) -> tuple[torch.Tensor, object, torch.Tensor]:
    """One forward over the left-padded prompts: (last logits [B, V], caches, key mask [B, width])."""
    lens = torch.tensor([len(p) for p in prompts], device=dev)
    width = int(lens.max())
    pad = width - lens  # left padding per row
    tokens = torch.zeros(len(prompts), width, dtype=torch.long, device=dev)
    for i, p in enumerate(prompts):
        tokens[i, int(pad[i]) :] = torch.tensor(p, dtype=torch.long, device=dev)
    cols = torch.arange(width, device=dev)[None, :]
    key_mask = cols >= pad[:, None]
    positions = (cols - pad[:, None]).clamp(min=0)
    logits, caches = model.decode(tokens, None, positions=positions, key_mask=key_mask)
    return logits[:, -1], caches, key_mask


def _sample(model: Policy, prompts, plist, generator) -> list[Completion]:
    n = len(prompts)
    dev = model.device  # everything lives where the model does
    lens = torch.tensor([len(p) for p in prompts], device=dev)
    # GRPO asks for a group of completions of each prompt: equal prompts are prefilled once and
    # their cache rows repeated, as a prefix cache would (a row's prefill depends on its own tokens only)
    first: dict[tuple[int, ...], int] = {}
    of_row = [first.setdefault(tuple(p), len(first)) for p in prompts]
    last, caches, key_mask = _prefill(model, list(first), dev)
    if len(first) < n:
        rows = torch.tensor(of_row, device=dev)
        caches = model.select(caches, rows)
        last, key_mask = last[rows], key_mask[rows]

    temps = torch.tensor([p.temperature for p in plist], dtype=torch.float32, device=dev)
    top_p = torch.tensor([p.top_p for p in plist], dtype=torch.float32, device=dev)
    stops = [set(p.stop_token_ids) for p in plist]
    budget = [p.max_tokens for p in plist]
    outs = [Completion() for _ in range(n)]

    live = torch.arange(n, device=dev)  # original row of each batch row
    next_pos = lens.clone()
    while len(live):
        tok, lp, slp = _pick(last, temps[live], top_p[live], generator)
        keep = []
        # one device-to-host copy per step, not one per row
        rows, toks, lps, slps = live.tolist(), tok.tolist(), lp.tolist(), slp.tolist()
        for j, row in enumerate(rows):
            t = toks[j]
            out = outs[row]
            out.tokens.append(t)
            out.logprobs.append(lps[j])
            out.sampling_logprobs.append(slps[j])
            if t in stops[row]:
                out.finish_reason = "stop"
            elif len(out.tokens) >= budget[row]:
                out.finish_reason = "length"
            else:
                keep.append(j)
        if not keep:
            break
        if len(keep) < len(live):  # finished rows leave the batch
            sel = torch.tensor(keep, device=dev)
            caches = model.select(caches, sel)
            key_mask, tok, live = key_mask[sel], tok[sel], live[sel]
        key_mask = torch.cat((key_mask, torch.ones(len(live), 1, dtype=torch.bool, device=dev)), 1)
        pos = next_pos[live][:, None]
        logits, caches = model.decode(tok[:, None], caches, positions=pos, key_mask=key_mask)
        next_pos[live] += 1
        last = logits[:, -1]
    return outs
