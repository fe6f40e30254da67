"""The kill-and-resume harness every ``test_kill_resume*.py`` shares: run a job's command line in
its own session, SIGKILL the whole process group at a seeded point inside its working window
(no polite exception, no cleanup), and read outputs back for comparison with a clean run.

Jobs are driven only through their stable command lines (``python -m pipelines web ...``), so
the tests survive modules being moved behind those commands."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]


def run_job(args: list[str], kill_when: Callable[[], bool] | None = None, timeout: float = 600,
            env: dict[str, str] | None = None, pids: list[int] | None = None) -> tuple[int, bool, float]:
    """(exit code, killed?, seconds) of ``python ARGS``. ``kill_when()`` is polled while the job
    runs; when it turns true the job's whole process group (it runs in its own session) gets
    SIGKILL. A job that ends by itself must exit 0 (its stderr tail is the failure message).
    ``pids`` receives the job's process id (what it labels its containers with)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=None if env is None else os.environ | env)
    if pids is not None:
        pids.append(proc.pid)
    err_chunks: list[bytes] = []
    os.set_blocking(proc.stderr.fileno(), False)
    while proc.poll() is None:
        _drain(proc, err_chunks)  # a chatty job must not block on a full pipe
        if kill_when is not None and kill_when():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            assert_group_gone(proc.pid)
            return proc.returncode, True, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{args} ran past {timeout}s")
        time.sleep(0.02)
    _drain(proc, err_chunks)
    err = b"".join(err_chunks).decode(errors="replace")
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{err[-3000:]}"
    return proc.returncode, False, time.monotonic() - t0


def _drain(proc: subprocess.Popen, chunks: list[bytes]) -> None:
    while True:
        try:
            data = proc.stderr.read(65536)
        except BlockingIOError:
            return
        if not data:
            return
        chunks.append(data)
        if sum(map(len, chunks)) > 1 << 20:  # keep the tail only
            del chunks[: len(chunks) // 2]


def assert_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of the killed job (group {pgid}) survived SIGKILL")


def after_first(out: Path, pattern: str, delay_s: float) -> Callable[[], bool]:
    """A kill point: ``delay_s`` after the first output matching ``pattern`` appears (the job's
    start-up, mostly imports, is not where a kill can hurt)."""
    seen: list[float] = []

    def due() -> bool:
        if not seen and any(out.glob(pattern)):
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] >= delay_s
    return due


def after_lines(path: Path, n: int, delay_s: float = 0.0) -> Callable[[], bool]:
    """A kill point inside a step-by-step job: ``delay_s`` after ``path`` holds ``n`` lines (say,
    metrics of ``n`` steps), so the kill lands mid-run rather than in start-up or exit."""
    seen: list[float] = []

    def due() -> bool:
        if not seen and path.is_file() and path.read_bytes().count(b"\n") >= n:
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] >= delay_s
    return due


def kill_points(work_s: float, seed: int, n: int) -> list[float]:
    """Seeded delays across the job's working window (first output -> done)."""
    rng = random.Random(seed)
    return sorted(rng.uniform(0.0, 1.0) * work_s for _ in range(n))


def work_window(out: Path, pattern: str, args: list[str], env: dict[str, str] | None = None) -> float:
    """Runs the clean job and returns how long it worked after its first output appeared."""
    first: list[float] = []

    def watch() -> bool:
        if not first and any(out.glob(pattern)):
            first.append(time.monotonic())
        return False
    run_job(args, kill_when=watch, env=env)
    return max(0.05, time.monotonic() - first[0]) if first else 0.5


def files_left(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []


def parquet_rows(out: Path, kind: str) -> list[tuple]:
    """Every row (all columns) of the Parquet files under ``out/kind``, sorted (ids may repeat in rejects)."""
    files = sorted(str(p) for p in (out / kind).rglob("*.parquet"))  # dedup nests rejects per phase
    if not files:
        return []
    return duckdb.connect().execute(
        "SELECT * FROM read_parquet(?, union_by_name=true) ORDER BY ALL", [files]).fetchall()


def jsonl(path: Path, drop: tuple[str, ...] = ()) -> list[dict]:
    """The records of a JSONL output without volatile keys; a torn line fails the parse."""
    if not path.exists():
        return []
    return [{k: v for k, v in json.loads(line).items() if k not in drop}
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def without(obj, volatile: frozenset[str]):
    """``obj`` with every key named in ``volatile`` removed at any depth (timings, paths)."""
    if isinstance(obj, dict):
        return {k: without(v, volatile) for k, v in obj.items() if k not in volatile}
    if isinstance(obj, list):
        return [without(v, volatile) for v in obj]
    return obj


def shard_dir(d: Path) -> dict[str, bytes]:
    """An Arrow shard directory as comparable bytes: each shard, and the manifest without timings."""
    manifest = json.loads((d / "manifest.json").read_text())
    for volatile in ("created_at", "seconds", "output", "config"):
        manifest.pop(volatile, None)
    if isinstance(manifest.get("tokenizer"), dict):  # where the run's own tokenizer.json lies
        manifest["tokenizer"].pop("path", None)
    out = {p.name: p.read_bytes() for p in sorted(d.glob("shard-*.arrow"))}
    out["manifest"] = json.dumps(manifest, sort_keys=True).encode()
    return out


def job_counts(out: Path) -> dict:
    """The per-stage counts a pipelines job writes to ``job.json``."""
    return json.loads((out / "job.json").read_text())["counts"]
