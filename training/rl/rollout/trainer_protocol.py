"""The orchestrator's trainer protocol: the buffer's release, commits, re-delivery, weight pushes.

``POST /batch {"groups": B, "timeout_s"}`` returns up to B finished groups, waiting until B are
ready (the buffer's release threshold; in sync mode the request is also the demand that makes the
orchestrator generate them). ``POST /commit`` writes final ledger rows — the trainer sends them
once the update that used them is checkpointed. ``POST /trainer_start`` records the commit the
trainer's checkpoint carries (idempotently: its process may have died before sending it) and puts
groups delivered but never committed (their trainer died) back at the front of the buffer.
``POST /weights`` pushes a checkpoint to every healthy rollout server as the next weight version
(aborting in-flight requests if asked); managed servers that restart later start from it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from training.serving import rollout_client
from training.serving.http_json import CallFailure


class TrainerProtocol:
    """Mixed into ``Orchestrator``: uses its ``cond``, ``ready``, ``delivered``, ``ledger``,
    ``registry``, ``counters``, ``mode`` and ``demand``."""

    # -- trainer protocol --------------------------------------------------------------------------
    def take_batch(self, n_groups: int, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            if self.mode == "sync":
                self.demand = max(self.demand, n_groups)
                self.cond.notify_all()
            while len(self.ready) < n_groups and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 0.5))
            taken = [self.ready.popleft() for _ in range(min(n_groups, len(self.ready)))]
            for g in taken:
                self.delivered[g.id] = g
            if self.mode == "sync":
                self.demand = max(0, self.demand - len(taken))
            return {"groups": [{"group": g.id, "task": g.task, "trajectories": [j.traj.payload() for j in g.jobs]}
                               for g in taken], "weight_version": self.weight_version}

    def commit(self, body: dict[str, Any]) -> dict[str, Any]:
        done = 0
        for row in body.get("trained", []):
            self.ledger.record(row["id"], "trained", None, **{k: v for k, v in row.items() if k != "id"})
            done += 1
        for row in body.get("dropped", []):
            self.ledger.record(row["id"], "dropped", row["reason"], **{k: v for k, v in row.items()
                                                                        if k not in ("id", "reason")})
            done += 1
        with self.cond:
            for gid in body.get("groups", []):
                self.delivered.pop(gid, None)
        return {"committed": done}

    def trainer_start(self, body: dict[str, Any]) -> dict[str, Any]:
        """A (re)started trainer: first the commit its checkpoint carries (the previous process may
        have died before sending it; rows already recorded are skipped), then every group delivered
        and still not committed goes back to the front of the buffer."""
        done = body.get("commit") or {}
        for row in done.get("trained", []):
            self.ledger.record_once(row["id"], "trained", None, **{k: v for k, v in row.items() if k != "id"})
        with self.cond:
            for gid in done.get("groups", []):
                self.delivered.pop(gid, None)
            back = [g for g in self.delivered.values()
                    if any(j.id not in self.ledger.final for j in g.jobs)]
            self.delivered.clear()
            for g in reversed(back):
                g.jobs = [j for j in g.jobs if j.id not in self.ledger.final]
                self.ready.appendleft(g)
            self.counters["groups_redelivered"] += len(back)
            self.trainer_seen.set()
            self.cond.notify_all()
        return {"requeued": len(back), "weight_version": self.weight_version, "weights_path": self.weights_path}

    def push_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        version, path = int(body["version"]), str(body["path"])
        abort_inflight = bool(body.get("abort_inflight", False))
        self.weight_version, self.weights_path = version, path
        slots = self.registry.healthy("rollout")
        results: dict[str, Any] = {}

        def push(s) -> None:
            results[s.key] = rollout_client.update_weights(s.endpoint, self.cfg.rollout.backend, path, version,
                                                           abort_inflight)
            if not isinstance(results[s.key], CallFailure):
                s.info["weight_version"] = version  # what its untagged samples are labelled with

        threads = [threading.Thread(target=push, args=(s,)) for s in slots]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        failed = {k: str(v) for k, v in results.items() if isinstance(v, CallFailure)}
        self.counters["weight_pushes"] += 1
        self.counters["weight_push_failures"] += len(failed)
        return {"pushed": len(results) - len(failed), "failed": failed, "weight_version": version}

