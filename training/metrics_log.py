"""Per-step metrics: one JSON object per line, mirrored to TensorBoard when it is installed.

Also the one reader (and rewriter) of the JSONL logs our own processes append to: metrics,
the RL ledger, the fault log. Not ``core.io.read_jsonl``, which fails on a bad line: a writer
killed mid-line leaves a torn line (possibly mid-character), which is skipped here, its
record being written again by the resumed run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.io import atomic_write_text


class MetricsSink:
    def __init__(
        self,
        path: str | Path | None,
        append: bool = False,
        tensorboard_dir: str | Path | None = None,
        log: Callable[[str], None] = print,
        from_step: int | None = None,
    ):
        self._fh = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if append and from_step is not None:
                keep_steps_before(Path(path), from_step)
            self._fh = open(path, "a" if append else "w", encoding="utf-8")
        self._tb = None
        if tensorboard_dir is not None:
            try:  # optional dependency: JSONL is the contract, TensorBoard a convenience
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(tensorboard_dir))
            except ImportError:
                log("tensorboard is not installed; metrics go to JSONL only")

    def write(self, rec: dict[str, Any]) -> None:
        if self._fh:
            self._fh.write(json.dumps(rec) + "\n")
            self._fh.flush()
        if self._tb is not None:
            for k, v in rec.items():
                if isinstance(v, (int, float)) and k != "step":
                    self._tb.add_scalar(k, v, rec["step"])

    def close(self) -> None:
        if self._fh:
            self._fh.close()
        if self._tb is not None:
            self._tb.close()


def read_log_rows(path: Path) -> list[dict[str, Any]]:
    """The records of an appended JSONL log, torn lines skipped; [] when there is none yet."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            rows.append(rec)
    return rows


def keep_log_rows(path: Path, keep: Callable[[dict[str, Any]], bool]) -> None:
    """Rewrite the log with only the records ``keep`` accepts, in ``MetricsSink.write``'s form."""
    if not path.is_file():
        return
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in read_log_rows(path) if keep(r)))


def keep_steps_before(path: Path, step: int) -> None:
    """A run resumed from its checkpoint at ``step`` trains the steps after it again: records of
    those steps written before a kill go (else they would appear twice), and so does a line torn
    by the kill, so the file reads as one uninterrupted run."""
    keep_log_rows(path, lambda r: isinstance(r.get("step"), int) and r["step"] < step)
