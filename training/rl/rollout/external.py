"""Groups that arrive finished: trajectories recorded elsewhere (the agent gateway's sessions of
external agent frameworks) enter the trainer's buffer like the orchestrator's own groups.

``POST /trajectories {"task", "group", "trajectories": [Trajectory payloads]}``: each trajectory is
issued in the ledger under its own id (an id seen before is refused: the ledger accounts for every
one exactly once) and the group waits in the buffer for ``/batch``; from there on it is trained or
dropped with a reason like any other.
"""

from __future__ import annotations

from typing import Any

from training.rl.rollout.groups import Group, Job
from training.rl.rollout.ledger import LedgerError
from training.rl.trajectory import Trajectory
from training.serving.http_json import HttpError


class ExternalGroups:
    """Mixed into ``Orchestrator``: uses its ``cond``, ``ready``, ``ledger`` and ``counters``."""

    def submit_group(self, body: dict[str, Any]) -> dict[str, Any]:
        task, raw = body.get("task"), body.get("trajectories")
        if not isinstance(task, str) or not task or not isinstance(raw, list) or not raw:
            raise HttpError(400, "trajectories needs task (str) and trajectories (a non-empty list)")
        try:
            trajs = [Trajectory.from_payload(t) for t in raw]
        except TypeError as err:  # the two sides drifted apart: refused, never half-read
            raise HttpError(400, f"not a trajectory: {err}") from None
        for t in trajs:
            if t.reward is None or not t.turns or len(t.output_ids) != len(t.loss_mask):
                raise HttpError(400, f"trajectory {t.id}: needs a reward, a model turn and one mask bit per token")
        gid = f"ext-{body.get('group') or trajs[0].id}"
        group = Group(gid, task, {}, trajs[0].messages, trajs[0].prompt_ids, {},
                      min(t.weight_version for t in trajs), max(len(t.turns) for t in trajs))
        with self.cond:
            try:
                for t in trajs:
                    self.ledger.issue(t.id, task, gid)
            except LedgerError as err:
                raise HttpError(409, str(err)) from None
            for t in trajs:
                t.task, t.group = task, gid
                group.jobs.append(Job(t, group, stage="done"))
            self.ready.append(group)
            self.counters["external_groups"] += 1
            self.cond.notify_all()
        return {"group": gid, "issued": len(trajs)}
