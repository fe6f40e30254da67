"""One policy update from a batch of trajectories: the trainer side of group-wise RL and of
on-policy distillation.

Any policy (``training.policy``: our GLM model, or a transformers causal LM), with its own
optimizer (Muon/MuonSplit/AdamW, as pre-training), gradient clipping and after-step hook (GLM's
aux-loss-free expert-bias update); what differs from pre-training is the loss. Per
update: logprobs of the old policy (this model before the update, no grad; taken from the
update's own forward when there is one pass over one minibatch) and, when configured, of the
reference policy; then ``epochs`` passes over ``minibatches`` slices, each a forward with grad,
the clipped token-level loss, backward, clip, optimizer step.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

from core.config import StrictModel
from training.policy import Policy, as_policy
from training.rl.algo.losses import (
    PolicyLossConfig,
    group_advantages,
    masked_mean,
    pad_rows,
    policy_loss,
    token_logprobs,
)
from training.rl.trajectory import Trajectory


class UpdateConfig(StrictModel):
    loss: PolicyLossConfig = PolicyLossConfig()
    epochs: int = Field(default=1, gt=0)  # passes over one batch (>1: off-policy steps, clipped)
    minibatches: int = Field(default=1, gt=0)
    # samples per forward/backward within a minibatch, gradients accumulated (TRL's gradient accumulation,
    # verl's micro batch): the step is the minibatch's, the activations only this many samples'; None: all at once
    micro_batch: int | None = Field(default=None, gt=0)
    grad_clip: float = Field(default=1.0, gt=0)
    temperature: float = Field(default=1.0, ge=0)  # must match the sampler's


def batch_tensors(trajs: list[Trajectory]) -> dict[str, Any]:
    """Right-padded rows of prompt + output; the loss mask and rollout logprobs are the
    trajectories' own after the prompt (0 on the prompt and the padding)."""
    tokens, doc_lens = pad_rows([t.tokens for t in trajs])
    mask = torch.zeros_like(tokens, dtype=torch.float32)
    rollout_lp = torch.zeros_like(tokens, dtype=torch.float32)
    for i, t in enumerate(trajs):
        start, end = len(t.prompt_ids), len(t.prompt_ids) + len(t.output_ids)
        mask[i, start:end] = torch.tensor(t.loss_mask, dtype=torch.float32)
        rollout_lp[i, start:end] = torch.tensor(t.logprobs, dtype=torch.float32)
    return {"tokens": tokens, "doc_lens": doc_lens, "mask": mask, "rollout_logp": rollout_lp}


def rl_advantages(trajs: list[Trajectory], group_size: int, cfg: PolicyLossConfig) -> torch.Tensor:
    rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32)
    return group_advantages(rewards, group_size, cfg.std_normalize, cfg.eps)


@torch.no_grad()
def logprobs_of(model: Policy, b: dict[str, Any], temperature: float) -> torch.Tensor:
    model = as_policy(model)
    was = model.training
    model.eval()
    try:
        return token_logprobs(model, b["tokens"], b["doc_lens"], temperature, b.get("mask"))
    finally:
        model.train(was)


def micro_batches(chunk: torch.Tensor, size: int | None, mask: torch.Tensor):
    """(sample indices, share) per micro-batch of a minibatch ``chunk``: ``size`` samples at a time,
    each share its count of loss tokens over the minibatch's (``mask``: [B, L]), so the shares of
    the micro-batches' token means add up to the minibatch's token mean."""
    rows = chunk.tolist()
    size = size or len(rows)
    parts = [rows[i : i + size] for i in range(0, len(rows), size)]
    total = float(mask[rows].sum())
    for sel in parts:
        yield sel, float(mask[sel].sum()) / total if total else 1.0 / len(parts)


def merge_stats(parts: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """One minibatch's stats from its micro-batches': token counts summed, the rest share-weighted."""
    keys = dict.fromkeys(k for _, st in parts for k in st)
    return {k: sum(st.get(k, 0.0) for _, st in parts) if k == "tokens" else sum(w * st.get(k, 0.0) for w, st in parts)
            for k in keys}


def policy_update(
    model: Policy,
    opt: torch.optim.Optimizer,
    trajs: list[Trajectory],
    advantages: torch.Tensor | None,
    cfg: UpdateConfig,
    ref_model: Policy | None = None,
    teacher_logp: torch.Tensor | None = None,
    distill_coef: float = 1.0,
) -> dict[str, float]:
    """Update ``model`` on ``trajs``. ``advantages``: one per trajectory (RL), or None with
    ``teacher_logp`` [B, L] for on-policy distillation, whose per-token advantage is
    sg[log pi_teacher - log pi_old] (``training.rl.algo.distill``)."""
    model = as_policy(model)
    b = batch_tensors(trajs)
    if teacher_logp is None and advantages is None:
        raise ValueError("policy_update needs advantages or teacher logprobs")
    # One pass over one batch is on-policy: the old policy is this model before its only step, so
    # the grad forward's own detached logprobs are log pi_old and the separate no-grad forward is
    # skipped (a third of the update's forward work; TRL's GRPOTrainer does the same when
    # num_iterations is 1). Several epochs or minibatches step in between: those need it first.
    one_pass = cfg.epochs == 1 and cfg.minibatches == 1
    # one pass: filled in by each micro-batch's own forward, before its step
    logp_old = torch.zeros_like(b["rollout_logp"]) if one_pass else logprobs_of(model, b, cfg.temperature)
    logp_ref = logprobs_of(ref_model, b, cfg.temperature) if ref_model is not None else None
    model.train()
    n = len(trajs)
    stats: dict[str, float] = {}
    for _ in range(cfg.epochs):
        for chunk in torch.arange(n).chunk(cfg.minibatches):
            opt.zero_grad(set_to_none=True)
            parts = []
            for sel, share in micro_batches(chunk, cfg.micro_batch, b["mask"]):
                sub = {"tokens": b["tokens"][sel], "doc_lens": [b["doc_lens"][i] for i in sel]}
                logp = token_logprobs(model, sub["tokens"], sub["doc_lens"], cfg.temperature, b["mask"][sel])
                if one_pass:
                    logp_old[sel] = logp.detach()
                if teacher_logp is not None:  # sg[log pi_teacher - log pi_old] per token
                    adv = distill_coef * (teacher_logp[sel] - logp_old[sel]) * b["mask"][sel]
                else:
                    adv = advantages[sel]
                out = policy_loss(
                    logp,
                    logp_old[sel],
                    adv,
                    b["mask"][sel],
                    cfg.loss,
                    logp_rollout=b["rollout_logp"][sel],
                    logp_ref=None if logp_ref is None else logp_ref[sel],
                )
                (out.loss * share).backward()  # the minibatch's token mean, summed over its micro-batches
                parts.append((share, {**out.stats, "loss": float(out.loss.detach())}))
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            model.after_step()
            stats = {**merge_stats(parts), "grad_norm": float(grad_norm)}
    stats["rollout_trainer_logp_diff"] = float(masked_mean((logp_old - b["rollout_logp"]).abs(), b["mask"]))
    if teacher_logp is not None:
        stats["teacher_minus_student"] = float(masked_mean(teacher_logp - logp_old, b["mask"]))
    return stats
