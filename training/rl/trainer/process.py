"""The trainer process of asynchronous RL: threshold batches in, weight versions out.

Loop: ask the orchestrator for ``batch_groups`` finished groups (the time spent waiting is the
trainer's idle time); drop (or keep with truncated importance weights) every trajectory more
than ``staleness`` versions behind the weights being trained; one group-wise policy step
(``training.rl.algo.update``: group-normalised advantages, clipped token-level loss, TIS against the
rollout logprobs; loss only on sampled tokens, optionally only on a partial rollout's newest-
version tokens); every ``push_every`` updates reset the optimizer if configured, save a
checkpoint (holding the reset state and the ledger commit of its updates), push it to the rollout
servers as the next ``weight_version`` (aborting their in-flight requests if configured), and only
then commit the trained trajectories to the ledger. A trainer that dies loses at most the updates
since its last checkpoint: on restart it reloads it, re-sends its commit and, if the push never
went out, its weights; the orchestrator hands the uncommitted groups back — each trajectory is
trained exactly once in the run's surviving history.

Runs as its own process (``python -m training.rl.trainer.process``), started by ``train``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import typer

from core.cli import run_app, user_errors
from core.config import validate_config
from core.errors import UserError
from training.checkpoint import latest_checkpoint, load_optimizer_state
from training.metrics_log import MetricsSink, keep_log_rows
from training.policy import load_policy
from training.rl.algo.losses import group_advantages
from training.rl.algo.update import policy_update
from training.rl.trainer.config import RLAsyncConfig
from training.rl.trajectory import Trajectory
from training.serving.http_json import CallFailure, call

CRASH_EXIT = 75  # a deliberate crash (fault injection): the supervisor restarts the trainer


def _orch(url: str, route: str, body: dict[str, Any] | None = None, timeout_s: float = 600.0) -> dict:
    res = call(f"{url}/{route}", body, timeout_s)
    if isinstance(res, CallFailure):
        raise UserError(f"orchestrator {route}: {res}")
    return res


def newest_tokens_only(t: Trajectory) -> Trajectory:
    """``t`` with the loss only on the sampled tokens of its newest weight version (a partial
    rollout's older tokens stay in context, out of the loss)."""
    newest = max((v for v, m in zip(t.token_versions, t.loss_mask, strict=True) if m), default=0)
    mask = [int(m and v == newest) for m, v in zip(t.loss_mask, t.token_versions, strict=True)]
    return replace(t, loss_mask=mask)


def split_stale(groups: list[list[Trajectory]], version: int, staleness: int, policy: str,
                min_group: int) -> tuple[list[list[Trajectory]], list[dict]]:
    """(groups to train, dropped rows): a trajectory sampled more than ``staleness`` versions
    before ``version`` is dropped (``policy: drop``) or kept for importance correction; a group
    left with fewer than ``min_group`` members cannot be normalised and goes too."""
    kept, dropped = [], []
    for g in groups:
        fresh = []
        for t in g:
            behind = version - t.weight_version
            if behind > staleness and policy == "drop":
                dropped.append({"id": t.id, "reason": "stale", "versions_behind": behind})
            else:
                fresh.append(t)
        if len(fresh) >= min_group:
            kept.append(fresh)
        else:
            dropped += [{"id": t.id, "reason": "stale_group_too_small"} for t in fresh]
    return kept, dropped


class AsyncTrainer:
    def __init__(self, cfg: RLAsyncConfig, out: Path, orch_url: str, log=print):
        self.cfg, self.tc, self.out, self.url, self.log = cfg, cfg.trainer, out, orch_url, log
        self.ckpt_dir = out / "checkpoints"
        torch.manual_seed(cfg.seed)
        found = latest_checkpoint(self.ckpt_dir)
        if found is None:
            raise UserError(f"{self.ckpt_dir}: no initial checkpoint (train writes step-00000000)")
        # any policy: the checkpoints hold its kind, shape, tokenizer (training.policy)
        self.model = load_policy(found)
        self.opt = self.model.optimizer(self.tc.optimizer)
        if (found / "optimizer.pt").is_file():
            load_optimizer_state(found, self.opt)
        state = json.loads((found / "trainer.json").read_text(encoding="utf-8"))
        self.update = int(state.get("update", 0))
        self.version = int(state.get("weight_version", 0))
        self.totals = dict(state.get("totals") or {"trained": 0, "stale_dropped": 0, "idle_s": 0.0, "wall_s": 0.0})
        self.ckpt_path = found
        # what this checkpoint trained; the commit may not have reached the orchestrator before a crash
        self.resumed_commit: dict = state.get("commit") or {}
        self.pending: list[dict] = []  # trained rows awaiting the next checkpoint
        self.pending_groups: list[str] = []
        self.dropped_unreported = 0  # stale drops of batches that made no update: counted in the next row
        self.log(f"[trainer] start at update {self.update}, weight_version {self.version} ({found.name})")

    def _step(self, groups: list[list[Trajectory]]) -> dict[str, float]:
        """One group-wise policy update (``training.rl.algo.update``). Groups may have lost members to
        failures, so advantages are normalised per group at its own size. Truncated importance
        sampling against the rollout logprobs corrects rollout/trainer mismatch and, for stale
        samples kept under ``stale_policy: importance``, their staleness."""
        trajs = [newest_tokens_only(t) if self.tc.mask_old_tokens else t for g in groups for t in g]
        loss = self.tc.update.loss
        adv = torch.cat([group_advantages(torch.tensor([t.reward for t in g], dtype=torch.float32), len(g),
                                          loss.std_normalize, loss.eps) for g in groups])
        stats = policy_update(self.model, self.opt, trajs, adv, self.tc.update)
        return {k: round(float(v), 6) for k, v in stats.items()}

    def _push(self) -> None:
        self.version += 1
        if self.tc.reset_optimizer:  # before saving: a trainer restarted from this checkpoint starts fresh too
            self.opt = self.model.optimizer(self.tc.optimizer)
        # the commit travels inside the checkpoint: a trainer killed after saving and before the
        # orchestrator recorded it sends it again on restart, so these groups are never re-delivered
        commit = {"trained": self.pending, "groups": self.pending_groups}
        state = {"update": self.update, "weight_version": self.version, "totals": self.totals, "commit": commit}
        path = self.model.save(self.ckpt_dir, self.update, self.opt, state)  # tokenizer included
        self._send_weights(path)
        _orch(self.url, "commit", commit)
        self.pending, self.pending_groups = [], []
        for old in sorted(self.ckpt_dir.glob("step-*"))[: -self.tc.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    def _send_weights(self, path: Path) -> None:
        res = _orch(self.url, "weights", {"version": self.version, "path": str(path),
                                           "abort_inflight": self.tc.partial_rollout == "abort"})
        if res.get("failed"):
            self.log(f"[trainer] push to some servers failed (they restart from it): {res['failed']}")

    def run(self) -> None:
        res = _orch(self.url, "trainer_start", {"update": self.update, "commit": self.resumed_commit})
        self.log(f"[trainer] orchestrator re-queued {res['requeued']} uncommitted group(s)")
        if int(res["weight_version"]) < self.version:  # killed after its checkpoint, before the push
            self.log(f"[trainer] servers are on v{res['weight_version']}: pushing v{self.version} again")
            self._send_weights(self.ckpt_path)
        self._truncate_metrics()
        sink = MetricsSink(self.out / "metrics.jsonl", append=True, log=self.log)
        t_start = time.monotonic()
        base_idle, base_wall = self.totals["idle_s"], self.totals["wall_s"]
        idle = 0.0
        try:
            while self.update < self.tc.updates:
                t0 = time.monotonic()
                got = _orch(self.url, "batch", {"groups": self.tc.batch_groups, "timeout_s": self.tc.batch_timeout_s},
                            timeout_s=self.tc.batch_timeout_s + 30)
                idle += time.monotonic() - t0
                if not got["groups"]:
                    raise UserError(f"no batch within {self.tc.batch_timeout_s}s: are the task services and "
                                    f"rollout servers up? ({self.url}/status)")
                delivered = [[Trajectory.from_payload(t) for t in g["trajectories"]] for g in got["groups"]]
                kept, dropped = split_stale(delivered, self.version, self.tc.staleness, self.tc.stale_policy,
                                            self.cfg.orchestrator.min_group_size)
                if dropped:
                    _orch(self.url, "commit", {"dropped": [d | {"update": self.update} for d in dropped]})
                    self.totals["stale_dropped"] += len(dropped)
                ids = [g["group"] for g in got["groups"]]
                if not kept:
                    _orch(self.url, "commit", {"groups": ids})
                    self.dropped_unreported += len(dropped)
                    continue
                t1 = time.monotonic()
                stats = self._step(kept)
                trajs = [t for g in kept for t in g]
                self.update += 1
                self.pending += [{"id": t.id, "update": self.update, "trained_version": self.version,
                                  "weight_version": t.weight_version, "reward": t.reward} for t in trajs]
                self.pending_groups += ids
                self.totals["trained"] += len(trajs)
                wall = time.monotonic() - t_start
                self.totals["idle_s"], self.totals["wall_s"] = base_idle + idle, base_wall + wall
                behind = [self.version - t.weight_version for t in trajs]
                by_task: dict[str, list[float]] = {}
                for t in trajs:
                    by_task.setdefault(t.task, []).append(t.reward)
                rec = {"update": self.update, "reward": round(sum(t.reward for t in trajs) / len(trajs), 6),
                       "weight_version": self.version, "stale_dropped": len(dropped) + self.dropped_unreported,
                       "stale_dropped_total": self.totals["stale_dropped"],
                       "idle_ratio": round(self.totals["idle_s"] / max(self.totals["wall_s"], 1e-9), 4),
                       "samples": len(trajs), "trained_total": self.totals["trained"],
                       "wall_s": round(self.totals["wall_s"], 3), "samples_per_s": round(self.totals["trained"] / max(self.totals["wall_s"], 1e-9), 3),
                       "versions_behind_mean": round(sum(behind) / len(behind), 3), "versions_behind_max": max(behind),
                       "wait_s": round(t1 - t0, 3), "train_s": round(time.monotonic() - t1, 3),
                       "reward_by_task": {k: round(sum(v) / len(v), 4) for k, v in sorted(by_task.items())},
                       "mean_tokens": round(sum(len(t.output_ids) for t in trajs) / len(trajs), 2),
                       # share of a group's completions that are distinct: replicas sampling one random
                       # stream returned duplicates, which a reward curve alone does not show
                       "distinct_frac": round(sum(len({tuple(t.output_ids) for t in g}) / len(g) for g in kept)
                                              / len(kept), 4), **stats}
                # written before the push: a restart drops rows past its checkpoint (_truncate_metrics),
                # so a row is never missing for an update that a checkpoint holds
                sink.write(rec | {"step": self.update})
                self.dropped_unreported = 0
                self._maybe_crash()  # trained but not yet pushed or committed: the hardest moment to die
                if self.update % self.tc.push_every == 0 or self.update == self.tc.updates:
                    self._push()
                self.log(f"[trainer] update {self.update}: reward {rec['reward']:.3f} v{self.version} "
                         f"stale {len(dropped)} idle {rec['idle_ratio']:.2f} {rec['samples_per_s']:.2f} samples/s")
        finally:
            sink.close()

    def _truncate_metrics(self) -> None:
        """Rows of updates lost with a crashed trainer go: they are trained again after restart."""
        keep_log_rows(self.out / "metrics.jsonl", lambda r: r.get("update", 0) <= self.update)

    def _maybe_crash(self) -> None:
        crash_at = self.cfg.orchestrator.faults.trainer_crash_after_updates
        marker = self.out / f".trainer-crashed-{self.update}"
        if self.update in crash_at and not marker.exists():
            marker.write_text("1")
            from training.serving.faults import log_fault

            log_fault(self.out / "faults.jsonl", "trainer_crash", update=self.update)
            self.log(f"[trainer] fault injection: crashing after update {self.update}")
            os._exit(CRASH_EXIT)  # no cleanup on purpose: what a killed process leaves


app = typer.Typer(add_completion=False, help="The trainer process of asynchronous RL (started by `train`).")


@app.command()
@user_errors(sigterm_unwinds=True)
def main(
    config: Path = typer.Option(..., help="the resolved run config (OUT/config.json)"),
    out: Path = typer.Option(..., help="run directory"),
    orchestrator: str = typer.Option(..., help="orchestrator URL"),
) -> None:
    cfg = validate_config(RLAsyncConfig, json.loads(config.read_text(encoding="utf-8")), str(config))
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    AsyncTrainer(cfg, out, orchestrator).run()


if __name__ == "__main__":
    run_app(app)
