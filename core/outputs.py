"""The one output preparation: what a job may do to the directory it writes into.

A job's state directory holds ``fingerprint.json`` (a digest of the job, its config and its
inputs). Re-running the same job resumes it (finished work is kept); running a different job
into it is refused unless ``overwrite``, which starts clean — and only ever deletes what a job
wrote: an empty directory or one holding a fingerprint, datasets that hold only Parquet parts.
A job that never resumes (the miner) names its ``fresh`` outputs: they are deleted on every run,
and a non-empty directory that is not a job output is refused outright.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.io import atomic_write_text

FINGERPRINT = "fingerprint.json"


def _is_dataset_dir(path: Path) -> bool:
    """Only Parquet parts and engine bookkeeping: safe to delete on overwrite."""
    return all(p.is_file() and (p.suffix == ".parquet" or p.name.startswith((".", "_"))) for p in path.iterdir())


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def prepare_output(state: Path, fingerprint: dict[str, Any], overwrite: bool, datasets: Iterable[Path] = (),
                   fresh: Iterable[str] = ()) -> None:
    """Make ``state`` (and the ``datasets`` directories the job writes beside it) ready for the
    job ``fingerprint`` describes; ``fresh``: names under ``state`` every run replaces."""
    fp_path = state / FINGERPRINT
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
    is_job_output = fp_path.is_file() or not state.exists() or not any(state.iterdir())
    if fresh and not is_job_output:
        raise UserError(f"{state} is not empty and is not a job output; choose another output directory")
    if overwrite:
        if not is_job_output:
            raise UserError(f"{state} is not empty and is not a job output; refusing to overwrite it")
        if state.exists():
            shutil.rmtree(state)
        for d in datasets:
            if d.exists():
                if not _is_dataset_dir(d):
                    raise UserError(f"{d} holds more than a dataset; refusing to overwrite it")
                shutil.rmtree(d)
    if fp_path.is_file():
        old = json.loads(fp_path.read_text())
        if old.get("digest") != digest:
            raise UserError(
                f"{state} holds the output of a different job or config; "
                "pass --overwrite to replace it or choose another output directory"
            )
    for name in fresh:
        _remove(state / name)
    state.mkdir(parents=True, exist_ok=True)
    atomic_write_text(fp_path, json.dumps({"digest": digest, "job": fingerprint}, indent=2, default=str))
