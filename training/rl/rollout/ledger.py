"""The trajectory ledger: every trajectory the orchestrator issues ends in exactly one row.

``OUT/issued.jsonl`` gets a row when a trajectory id is created; ``OUT/ledger.jsonl`` gets one
row when its fate is final — ``trained`` (its update was checkpointed) or ``dropped`` with a
reason (``stale``, ``failed:<kind>``, ``group_too_small``, ``shutdown``). Writing a second final
row for an id is a bug and raises: the accounting is the product, so it is enforced where it is
written, and ``audit`` proves it after a run (issued = trained + dropped, no duplicates).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from training.metrics_log import read_log_rows

STATUSES = ("trained", "dropped")


class LedgerError(RuntimeError):
    pass


class Ledger:
    """Thread-safe, append-only; reopening a directory continues its accounting."""

    def __init__(self, out_dir: str | Path, save_rollouts: bool = False):
        self.dir, self.save_rollouts = Path(out_dir), save_rollouts
        self.dir.mkdir(parents=True, exist_ok=True)
        self.issued_path = self.dir / "issued.jsonl"
        self.path = self.dir / "ledger.jsonl"
        self._lock = threading.RLock()
        self.issued: dict[str, str] = {r["id"]: r["task"] for r in read_log_rows(self.issued_path)}
        self.final: dict[str, str] = {}
        self.counts: Counter = Counter()
        for r in read_log_rows(self.path):
            self.final[r["id"]] = r["status"]
            self.counts[(r["status"], r.get("reason"))] += 1
        self._issued_fh = open(self.issued_path, "a", encoding="utf-8")
        self._fh = open(self.path, "a", encoding="utf-8")

    def issue(self, traj_id: str, task: str, group: str) -> None:
        with self._lock:
            if traj_id in self.issued:
                raise LedgerError(f"trajectory {traj_id} issued twice")
            self.issued[traj_id] = task
            self._issued_fh.write(json.dumps({"id": traj_id, "task": task, "group": group}) + "\n")
            self._issued_fh.flush()

    def buffered(self, payloads) -> None:
        """Trajectories of a group that reached the buffer: with ``save_rollouts``
        (``orchestrator.save_rollouts``) appended to ``rollouts.jsonl`` beside the ledger, row for row."""
        if not self.save_rollouts:
            return
        with self._lock, open(self.dir / "rollouts.jsonl", "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(p) + "\n" for p in payloads)

    def record(self, traj_id: str, status: str, reason: str | None = None, **fields: Any) -> None:
        if status not in STATUSES:
            raise LedgerError(f"status must be one of {STATUSES}, got {status!r}")
        if status == "dropped" and not reason:
            raise LedgerError(f"trajectory {traj_id} dropped without a reason")
        with self._lock:
            if traj_id not in self.issued:
                raise LedgerError(f"trajectory {traj_id} was never issued")
            if traj_id in self.final:
                raise LedgerError(f"trajectory {traj_id} already {self.final[traj_id]}; second row {status}")
            self.final[traj_id] = status
            self.counts[(status, reason)] += 1
            row = {"id": traj_id, "task": self.issued[traj_id], "status": status, "reason": reason, **fields}
            self._fh.write(json.dumps(row) + "\n")
            self._fh.flush()

    def record_once(self, traj_id: str, status: str, reason: str | None = None, **fields: Any) -> bool:
        """``record`` unless ``traj_id`` is already final (a commit sent again after a restart);
        returns whether a row was written."""
        with self._lock:
            if traj_id in self.final:
                return False
            self.record(traj_id, status, reason, **fields)  # the lock is re-entrant
            return True

    def close_open(self, traj_id: str, reason: str, **fields: Any) -> bool:
        """Drop ``traj_id`` with ``reason`` unless it is already final (a run ending while workers
        still finish their last calls); returns whether a row was written."""
        return self.record_once(traj_id, "dropped", reason, **fields)

    def open_ids(self) -> list[str]:
        with self._lock:
            return [i for i in self.issued if i not in self.final]

    def summary(self) -> dict[str, Any]:
        with self._lock:
            by_reason = Counter()
            for (status, reason), n in self.counts.items():
                by_reason[reason if status == "dropped" else "trained"] += n
            trained = sum(n for (s, _), n in self.counts.items() if s == "trained")
            return {"issued": len(self.issued), "trained": trained, "dropped": len(self.final) - trained,
                    "open": len(self.issued) - len(self.final), "by_reason": dict(sorted(by_reason.items()))}

    def close(self) -> None:
        with self._lock:
            self._fh.close()
            self._issued_fh.close()


def audit(out_dir: str | Path) -> dict[str, Any]:
    """Check a finished run's accounting from its files: every issued id has exactly one final row."""
    out_dir = Path(out_dir)
    issued = [r["id"] for r in read_log_rows(out_dir / "issued.jsonl")]
    rows = read_log_rows(out_dir / "ledger.jsonl")
    ids = Counter(r["id"] for r in rows)
    duplicated = sorted(i for i, n in ids.items() if n > 1)
    lost = sorted(set(issued) - set(ids))
    unknown = sorted(set(ids) - set(issued))
    no_reason = sorted(r["id"] for r in rows if r["status"] == "dropped" and not r.get("reason"))
    reasons = Counter(r.get("reason") or "trained" for r in rows)
    return {"issued": len(issued), "rows": len(rows), "trained": reasons.get("trained", 0),
            "dropped": len(rows) - reasons.get("trained", 0), "by_reason": dict(sorted(reasons.items())),
            "duplicated": duplicated, "lost": lost, "unknown": unknown, "dropped_without_reason": no_reason,
            "ok": not (duplicated or lost or unknown or no_reason)}
