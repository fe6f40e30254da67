"""Group-wise policy optimisation: advantages, the clipped token-level loss, KL, TIS.

Conventions (slime's, which GLM is trained with):

- A batch is right-padded token rows ``tokens [B, L]`` = prompt + response, with
  ``loss_mask [B, L]`` = 1 on tokens the policy generated and is trained on (0 on the prompt,
  on environment observations inside agentic trajectories and on padding). Position t of a
  logprob tensor is the log-probability of token t given tokens < t (position 0 is unused).
- ``group_advantages``: G samples per prompt; A_i = (r_i - mean_g r) / (std_g r + eps)
  (``std_normalize=False`` gives Dr. GRPO's mean-only centring). Every token of a sample
  gets its sample's advantage.
- ``policy_loss``: ratio = exp(logp - logp_old); per token
  ``-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` with the asymmetric
  clip 0.2 / 0.28 (DAPO's clip-higher); optional truncated importance sampling
  ``w = min(exp(logp_old - logp_rollout), tis_cap)`` multiplies each token's term when the
  rollout engine's logprobs differ from the trainer's; optional KL to a reference policy
  (the k3 estimator exp(ref - logp) - (ref - logp) - 1, times ``kl_coef``). The loss is a
  token-level mean: the sum over every masked token of the batch divided by their count, so
  long responses weigh per token, not per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from pydantic import Field

from core.config import StrictModel
from training.policy import Policy


class PolicyLossConfig(StrictModel):
    eps_clip_low: float = Field(default=0.2, ge=0)
    eps_clip_high: float = Field(default=0.28, ge=0)
    kl_coef: float = Field(default=0.0, ge=0)  # > 0 needs reference logprobs
    tis_cap: float | None = Field(default=2.0, gt=0)  # None = no truncated importance sampling
    std_normalize: bool = True
    eps: float = Field(default=1e-6, gt=0)


def group_advantages(
    rewards: torch.Tensor, group_size: int, std_normalize: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Rewards [N] ordered group by group (N = prompts x group_size) -> advantages [N]."""
    if group_size < 1 or rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    if not torch.isfinite(rewards).all():  # one NaN would turn its whole group's advantages NaN
        raise ValueError(f"non-finite rewards at {torch.nonzero(~torch.isfinite(rewards)).flatten().tolist()}")
    r = rewards.float().view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    if std_normalize and group_size > 1:
        centred = centred / (r.std(dim=1, keepdim=True, unbiased=False) + eps)
    return centred.reshape(-1)


def pad_rows(rows: list[list[int]], pad: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Right-pad token rows into [B, L]; doc_lens put each row's padding in its own segment,
    so the model's document masking keeps the pads out of the real tokens' attention."""
    width = max(len(r) for r in rows)
    tokens = torch.full((len(rows), width), pad, dtype=torch.long)
    doc_lens = []
    for i, r in enumerate(rows):
        tokens[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        lens = [len(r)] + ([width - len(r)] if width > len(r) else [])
        doc_lens.append(torch.tensor(lens, dtype=torch.int32))
    return tokens, doc_lens


def token_logprobs(
    model: Policy,
    tokens: torch.Tensor,
    doc_lens: list[torch.Tensor],
    temperature: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """[B, L]: log pi(token t | tokens < t) under logits / temperature; position 0 is 0.
    The same quantity the sampler returns, computed by a full (training-path) forward of any
    policy (or a bare ``GLMModel``: both take right-padded rows and their ``doc_lens``).
    With ``mask`` ([B, L], the loss mask) a policy computes only the masked tokens' logprobs (its
    ``logits_at``: the LM head and the softmax on those rows — a few new tokens after a long prompt
    are a small share of the positions); the others are 0, as every loss masks them."""
    if mask is not None and hasattr(model, "logits_at"):
        trained = mask[:, 1:] > 0
        lp = masked_log_softmax(model, tokens, doc_lens, mask, temperature)
        lp = lp.gather(-1, tokens[:, 1:][trained][:, None].long())[:, 0]
        logp = lp.new_zeros(trained.shape).masked_scatter(trained, lp)
        return torch.cat((logp.new_zeros(tokens.shape[0], 1), logp), 1)
    logits = model(tokens, doc_lens).float()
    if temperature > 0:
        logits = logits / temperature
    logp = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None].long())[..., 0]
    return torch.cat((logp.new_zeros(tokens.shape[0], 1), logp), 1)


def masked_log_softmax(
    model: Policy, tokens: torch.Tensor, doc_lens: list[torch.Tensor], mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """[N, V]: the whole next-token distribution (log, at ``temperature``) before each of the N
    masked tokens, in row-major order of ``mask[:, 1:]`` (position t's logits score token t + 1)."""
    trained = mask[:, 1:] > 0
    if hasattr(model, "logits_at"):
        logits = model.logits_at(tokens, doc_lens, F.pad(trained, (0, 1))).float()
    else:
        logits = model(tokens, doc_lens).float()[:, :-1][trained]
    if temperature > 0:
        logits = logits / temperature
    return logits.log_softmax(-1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.float()
    return (x * m).sum() / m.sum().clamp(min=1.0)


@dataclass
class LossOut:
    loss: torch.Tensor
    stats: dict[str, float]


def policy_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    cfg: PolicyLossConfig,
    logp_rollout: torch.Tensor | None = None,
    logp_ref: torch.Tensor | None = None,
) -> LossOut:
    """The token-level clipped surrogate (see the module docstring). ``advantages`` is [B]
    (one per sample) or [B, L] (per token, e.g. distillation)."""
    adv = advantages[:, None].expand_as(logp) if advantages.ndim == 1 else advantages
    adv = adv.detach()
    log_ratio = logp - logp_old.detach()
    ratio = log_ratio.exp()
    clipped = ratio.clamp(1 - cfg.eps_clip_low, 1 + cfg.eps_clip_high)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    stats: dict[str, float] = {}
    if cfg.tis_cap is not None and logp_rollout is not None:
        w = (logp_old - logp_rollout).detach().exp().clamp(max=cfg.tis_cap)
        per_token = per_token * w
        stats["tis_weight_mean"] = float(masked_mean(w, loss_mask))
    if cfg.kl_coef > 0:
        if logp_ref is None:
            raise ValueError("kl_coef > 0 needs reference logprobs (logp_ref)")
        d = logp_ref.detach() - logp
        kl = d.exp() - d - 1
        per_token = per_token + cfg.kl_coef * kl
        stats["kl"] = float(masked_mean(kl.detach(), loss_mask))
    loss = masked_mean(per_token, loss_mask)
    with torch.no_grad():
        m = loss_mask.bool()
        was_clipped = ((ratio < 1 - cfg.eps_clip_low) & (adv < 0)) | ((ratio > 1 + cfg.eps_clip_high) & (adv > 0))
        stats["clip_frac"] = float(masked_mean(was_clipped.float(), m))
        stats["approx_kl_old"] = float(masked_mean(-log_ratio.detach(), m))
        stats["tokens"] = float(m.sum())
    return LossOut(loss, stats)
