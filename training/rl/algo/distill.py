"""On-policy cross-stage distillation (GLM-5's last post-training stage).

The student samples its own responses (group size 1); each sample's teacher is the final
checkpoint of the stage that owns the sample's task type (registered by the stage runner:
SFT, reasoning RL, agentic RL, general RL). The per-token advantage is
``sg[log pi_teacher(y_t) - log pi_theta(y_t)]`` on the student's tokens, masked like RL (only
model-generated tokens), and the update is the same clipped token-level policy loss — the
reverse-KL gradient of slime's on-policy distillation. Where the student already matches its
teacher the advantage is zero, so skills the later stages did not touch are left alone.

``kl_update`` is the dense alternative (a stage's ``distill_loss: reverse_kl | forward_kl``): at every
state the student visited, the exact KL between the student's and the teacher's whole next-token
distributions (reverse: KL(student || teacher), mode-seeking as the sampled estimate is in
expectation; forward: KL(teacher || student), GKD's supervised variant on the student's own samples).
It needs the teacher's full distributions at those positions, not one logprob per token, and has no
sampling noise in the per-state gradient: the sampled estimate sees one token of 49K per state.
"""

from __future__ import annotations

from pathlib import Path

import torch

from core.errors import ConfigError, UserError
from training.policy import Policy, as_policy, load_policy
from training.rl.algo.losses import masked_log_softmax
from training.rl.algo.update import UpdateConfig, batch_tensors, logprobs_of, merge_stats, micro_batches
from training.rl.trajectory import Trajectory


class TeacherSet:
    """Teacher policies by task type, each loaded once from its checkpoint (ours or a Hugging Face
    directory; eval mode, frozen). A teacher scores the student's token ids, so it must share the
    student's vocabulary (``vocab_size``: checked when given)."""

    def __init__(self, checkpoints: dict[str, str | Path], vocab_size: int | None = None):
        if not checkpoints:
            raise ConfigError("distillation needs at least one teacher (task type -> checkpoint)")
        self.checkpoints = {task: Path(p) for task, p in checkpoints.items()}
        self._models: dict[Path, Policy] = {}
        for path in set(self.checkpoints.values()):
            teacher = load_policy(path).frozen()
            if vocab_size is not None and teacher.vocab_size != vocab_size:
                raise UserError(f"teacher {path}: vocabulary {teacher.vocab_size} != the student's {vocab_size}")
            self._models[path] = teacher

    def for_task(self, task: str) -> Policy:
        if task not in self.checkpoints:
            raise ConfigError(f"no teacher registered for task type {task!r} (have {sorted(self.checkpoints)})")
        return self._models[self.checkpoints[task]]

    def groups(self, trajs: list[Trajectory]) -> list[tuple[Policy, list[int]]]:
        """(teacher, the rows it scores) per teacher, so each teacher runs once per batch."""
        by_model: dict[int, tuple[Policy, list[int]]] = {}
        for i, t in enumerate(trajs):
            teacher = self.for_task(t.task)
            by_model.setdefault(id(teacher), (teacher, []))[1].append(i)
        return list(by_model.values())

    def logprobs(self, trajs: list[Trajectory], temperature: float) -> torch.Tensor:
        """[B, L] teacher logprobs of each trajectory's tokens, each under its own task's teacher."""
        b = batch_tensors(trajs)
        out = torch.zeros_like(b["mask"])
        for teacher, idx in self.groups(trajs):
            sub = {"tokens": b["tokens"][idx], "doc_lens": [b["doc_lens"][i] for i in idx], "mask": b["mask"][idx]}
            out[idx] = logprobs_of(teacher, sub, temperature)
        return out

    @torch.no_grad()
    def distributions(self, trajs: list[Trajectory], temperature: float) -> torch.Tensor:
        """[N, V] each teacher's whole next-token log-distribution before each of the batch's N
        loss-masked tokens (row-major over ``batch_tensors(trajs)["mask"][:, 1:]``, as
        ``masked_log_softmax``), each trajectory under its own task's teacher (frozen: eval mode)."""
        b = batch_tensors(trajs)
        trained, where = masked_positions(b["mask"])
        out: torch.Tensor | None = None
        for teacher, idx in self.groups(trajs):
            lp = masked_log_softmax(teacher, b["tokens"][idx], [b["doc_lens"][i] for i in idx], b["mask"][idx],
                                    temperature)
            if out is None:
                out = lp.new_zeros(int(trained.sum()), lp.shape[-1])
            out[where[idx][trained[idx]]] = lp
        return out


def masked_positions(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(trained [B, L-1]: the positions whose next token the loss trains; where: each such position's
    row in the [N, V] row-major tensors of ``masked_log_softmax``, -1 elsewhere)."""
    trained = mask[:, 1:] > 0
    where = torch.full(trained.shape, -1, dtype=torch.long)
    where[trained] = torch.arange(int(trained.sum()))
    return trained, where


def kl_update(
    model: Policy,
    opt: torch.optim.Optimizer,
    trajs: list[Trajectory],
    teacher_lp: torch.Tensor,
    cfg: UpdateConfig,
    direction: str = "reverse",
) -> dict[str, float]:
    """One dense distillation update: the mean over the loss-masked tokens of the KL between the
    student's and the teacher's next-token distributions there (``teacher_lp``: ``TeacherSet.distributions``),
    ``epochs`` passes over ``minibatches`` slices of trajectories, clipped and stepped as RL is."""
    if direction not in ("reverse", "forward"):
        raise ConfigError(f"distillation KL direction: reverse or forward, got {direction!r}")
    model = as_policy(model)
    b = batch_tensors(trajs)
    trained, where = masked_positions(b["mask"])
    model.train()
    stats: dict[str, float] = {}
    for _ in range(cfg.epochs):
        for chunk in torch.arange(len(trajs)).chunk(cfg.minibatches):
            opt.zero_grad(set_to_none=True)
            parts = []
            for sel, share in micro_batches(chunk, cfg.micro_batch, trained.float()):
                rows = where[sel][trained[sel]]
                if not len(rows):
                    continue
                lp = masked_log_softmax(model, b["tokens"][sel], [b["doc_lens"][i] for i in sel], b["mask"][sel],
                                        cfg.temperature)
                t = teacher_lp[rows]
                if direction == "reverse":  # sum_v p_s (log p_s - log p_t)
                    kl = (lp.exp() * (lp - t)).sum(-1)
                else:  # sum_v p_t (log p_t - log p_s)
                    kl = (t.exp() * (t - lp)).sum(-1)
                loss = kl.mean()
                (loss * share).backward()  # the minibatch's mean over its tokens, summed over its micro-batches
                tok = b["tokens"][sel][:, 1:][trained[sel]][:, None].long()
                parts.append((share, {"loss": float(loss.detach()), "kl": float(kl.detach().mean()),
                                      # the sampled tokens' log-ratio, the same statistic the sampled-token update logs
                                      "teacher_minus_student": float((t.gather(-1, tok) - lp.detach().gather(-1, tok)).mean())}))
            if not parts:
                continue
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            model.after_step()
            stats = {**merge_stats(parts), "grad_norm": float(grad_norm)}
    return stats
