"""On-policy cross-stage distillation (GLM-5's last post-training stage).

The student samples its own responses (group size 1); each sample's teacher is the final
checkpoint of the stage that owns the sample's task type (registered by the stage runner:
SFT, reasoning RL, agentic RL, general RL). The per-token advantage is
``sg[log pi_teacher(y_t) - log pi_theta(y_t)]`` on the student's tokens, masked like RL (only
model-generated tokens), and the update is the same clipped token-level policy loss — the
reverse-KL gradient of slime's on-policy distillation. Where the student already matches its
teacher the advantage is zero, so skills the later stages did not touch are left alone.
"""

from __future__ import annotations

from pathlib import Path

import torch

from core.errors import ConfigError, UserError
from training.policy import Policy, load_policy
from training.rl.algo.update import batch_tensors, logprobs_of
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

    def logprobs(self, trajs: list[Trajectory], temperature: float) -> torch.Tensor:
        """[B, L] teacher logprobs of each trajectory's tokens, each under its own task's
        teacher (trajectories grouped by teacher so each teacher runs once)."""
        b = batch_tensors(trajs)
        out = torch.zeros_like(b["mask"])
        by_model: dict[int, list[int]] = {}
        for i, t in enumerate(trajs):
            by_model.setdefault(id(self.for_task(t.task)), []).append(i)
        for idx in by_model.values():
            teacher = self.for_task(trajs[idx[0]].task)
            sub = {"tokens": b["tokens"][idx], "doc_lens": [b["doc_lens"][i] for i in idx], "mask": b["mask"][idx]}
            out[idx] = logprobs_of(teacher, sub, temperature)
        return out
