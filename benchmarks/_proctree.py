"""A command measured as a whole process tree: what `make load` and the volume benchmarks report.

The command runs in its own session. Every 0.5 s its process tree is sampled (psutil): the sum of
the processes' RSS (the job's driver, datatrove workers or Spark's JVM and Python workers, a served
LLM — shared pages counted once per process, so an upper bound) and the largest single one; the
output folder's size every 5 s. CPU seconds are the tree's own: the command's resource usage as
``wait4`` reports it (its own and that of every descendant it reaped, so two commands measured at
once do not mix) or, when more, the sum of the last CPU times seen per process (a process nobody
waits for — Spark's JVM — is only seen that way). Each output line is kept with the seconds since start at which it arrived, so a
job's own log ("phase 2 …") dates its steps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Measured:
    returncode: int
    seconds: float  # wall
    cpu_seconds: float  # the whole tree's user + system
    peak_rss_bytes: int  # sum over the tree
    peak_process_rss_bytes: int  # the largest single process
    peak_output_bytes: int
    final_output_bytes: int
    lines: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, line)

    def tail(self, n: int = 3000) -> str:
        return "\n".join(line for _, line in self.lines)[-n:]


def du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _sample(pid: int, cpu_seen: dict[int, float]) -> tuple[int, int]:
    """(sum of RSS, largest RSS) of the tree now; records each process's CPU so far."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    total = largest = 0
    for p in procs:
        try:
            with p.oneshot():
                rss = p.memory_info().rss
                t = p.cpu_times()
            cpu_seen[p.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            continue
        total += rss
        largest = max(largest, rss)
    return total, largest


def measure(cmd: list[str], out: Path, timeout: float, cwd: Path | None = None, env: dict | None = None,
            echo=None) -> Measured:
    """Run ``cmd`` to the end (killed as a group past ``timeout``), measuring it; ``echo`` gets
    each output line as it arrives."""
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True, errors="replace")

    def pump() -> None:
        for line in proc.stdout:
            lines.append((round(time.monotonic() - start, 2), line.rstrip("\n")))
            if echo is not None:
                echo(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    cpu_seen: dict[int, float] = {}
    peak_rss = peak_one = peak_disk = 0
    last_du = 0.0
    usage = None
    try:
        while usage is None:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:  # reaped here, with its own rusage (Popen is told, so it does not wait again)
                proc.returncode, usage = os.waitstatus_to_exitcode(status), ru
                break
            total, largest = _sample(proc.pid, cpu_seen)
            peak_rss, peak_one = max(peak_rss, total), max(peak_one, largest)
            if time.monotonic() - last_du > 5:
                peak_disk, last_du = max(peak_disk, du(out)), time.monotonic()
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{cmd[:4]} ran past {timeout:.0f}s")
            time.sleep(0.5)
    finally:
        if usage is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    final = du(out)
    return Measured(proc.returncode, round(time.monotonic() - start, 1),
                    round(max(usage.ru_utime + usage.ru_stime, sum(cpu_seen.values())), 1),
                    peak_rss, peak_one, max(peak_disk, final), final, lines)
