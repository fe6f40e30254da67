"""Learning-rate schedules: linear warmup, then cosine decay, WSD (warmup-stable-decay) or constant.

``lr_at(step, total, cfg, base_lr)`` is a pure function of the step, so a resumed run gets the
exact rate an uninterrupted one would. WSD holds the peak rate and decays only over the last
``decay_fraction`` of the steps, which is what lets mid-training stages be appended later.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from core.config import StrictModel


class ScheduleConfig(StrictModel):
    kind: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_steps: int = Field(default=5, ge=0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)  # final lr = min_lr_ratio * lr
    decay_fraction: float = Field(default=0.2, gt=0, le=1)  # wsd: share of steps spent decaying
    decay_shape: Literal["linear", "cosine", "sqrt"] = "linear"  # wsd: shape of that decay


def lr_at(step: int, total: int, cfg: ScheduleConfig, base_lr: float) -> float:
    """Rate used for optimizer step ``step`` (0-based) of ``total``."""
    if step < cfg.warmup_steps:
        return base_lr * (step + 1) / cfg.warmup_steps
    floor = cfg.min_lr_ratio
    if cfg.kind == "constant":
        return base_lr
    if cfg.kind == "cosine":
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
        return base_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))
    decay_steps = max(1, round(total * cfg.decay_fraction))
    decay_start = max(cfg.warmup_steps, total - decay_steps)
    if step < decay_start:
        return base_lr
    progress = min(1.0, (step - decay_start + 1) / max(1, total - decay_start))
    if cfg.decay_shape == "linear":
        remaining = 1 - progress
    elif cfg.decay_shape == "cosine":
        remaining = 0.5 * (1 + math.cos(math.pi * progress))
    else:  # "1 - sqrt" cooldown
        remaining = 1 - math.sqrt(progress)
    return base_lr * (floor + (1 - floor) * remaining)
