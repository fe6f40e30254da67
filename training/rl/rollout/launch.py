"""Command lines of the processes the orchestrator manages (evaluated at every (re)launch)."""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable


def process_seed(base: int, key: str, restarts: int) -> int:
    """A seed of its own for every managed process and relaunch. Replicas seeded alike (the run's
    seed + restarts, as before) drew the same random stream: two rollout servers handed the same
    group's prompts in the same batch shape sampled identical completions, so a group of G held
    duplicate pairs (fewer distinct samples, noisier group-normalised advantages)."""
    return zlib.crc32(f"{base}/{key}/{restarts}".encode()) & 0x7FFFFFFF


def rollout_command(orch, key: str) -> Callable[[], list[str]]:
    """A rollout server on a free port; a restarted one starts from the latest pushed weights."""
    cfg, f = orch.cfg, orch.cfg.faults

    def command() -> list[str]:
        if not orch.weights_path:
            raise RuntimeError("orchestrator.checkpoint: managed rollout servers need a checkpoint")
        cmd = [sys.executable, "-m", "training.rl", "serve", "--checkpoint", str(orch.weights_path),
               "--port", "0", "--register", orch.url, "--key", key, "--threads", str(cfg.rollout.threads),
               "--max-batch", str(cfg.rollout.capacity), "--chunk-tokens", str(cfg.rollout.chunk_tokens),
               "--seed", str(process_seed(cfg.seed, key, orch.registry.slots[key].restarts))]
        if cfg.tokenizer:
            cmd += ["--tokenizer", cfg.tokenizer]
        if f.rollout_slow_prob or f.rollout_garble_prob:
            cmd += ["--slow-prob", str(f.rollout_slow_prob), "--slow-s", str(f.rollout_slow_s),
                    "--garble-prob", str(f.rollout_garble_prob), "--fault-log", str(orch.out / "faults.jsonl")]
        return cmd

    return command


def task_command(orch, task, key: str) -> Callable[[], list[str]]:
    f = orch.cfg.faults

    def command() -> list[str]:
        args = dict(task.args)
        warmup = float(args.pop("warmup_s", 0.0))
        cmd = [sys.executable, "-m", "training.rl", "task-service", "--kind", task.kind, "--name", task.name,
               "--args", json.dumps(args), "--port", "0", "--capacity", str(task.capacity),
               "--register", orch.url, "--key", key, "--warmup-s", str(warmup),
               "--seed", str(process_seed(orch.cfg.seed, key, orch.registry.slots[key].restarts))]
        if f.task_slow_prob or f.task_garble_prob:
            cmd += ["--slow-prob", str(f.task_slow_prob), "--slow-s", str(f.task_slow_s),
                    "--garble-prob", str(f.task_garble_prob), "--fault-log", str(orch.out / "faults.jsonl")]
        return cmd

    return command
