"""Run every benchmark script one at a time, then print one table of all their results.

Scripts are every ``benchmarks/*.py`` except this one and ``_*`` helpers, so a benchmark added by
anyone shows up without touching this file. Each runs in its own process (a crash or a missing
GPU/Docker engine is that script's row, not the end of the run), one after the other, because
the ratios are only meaningful on an otherwise idle machine. The previous run's JSON files move
to ``out/bench/previous/`` first, and the table shows their ratios next to the new ones.
Exits 0 whether or not goals hold or scripts fail (the table says which).

Run: `make bench` or `python benchmarks/run_all.py [--only minhash,web_filters] [--skip ...]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _report

HERE = Path(__file__).resolve().parent
# cheap, quick scripts first; anything not listed runs after these, in name order
ORDER = ["loader_throughput", "newton_schulz", "moe_grouped", "moe_layer_cpu", "minhash", "web_filters",
         "sampler", "train_throughput", "longctx_packing", "longctx_retrieval", "engines", "swe_mine_engines",
         "swe_envs_cache"]  # fmt: skip
# scripts whose command line needs more than the defaults
ARGS = {"kernels_gpu": lambda out: [str(out / "kernels_gpu.json")]}


def scripts(where: Path = HERE) -> list[str]:
    found = {p.stem for p in where.glob("*.py") if not p.stem.startswith("_") and p.stem != "run_all"}
    return [s for s in ORDER if s in found] + sorted(found - set(ORDER))


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def run_one(name: str, out: Path, timeout: float, where: Path = HERE) -> tuple[str, float]:
    """Run one script, streaming its output; record a failed row when it wrote no fresh JSON."""
    cmd = [sys.executable, str(where / f"{name}.py"), *ARGS.get(name, lambda _: [])(out)]
    print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.time()
    err_tail = ""
    try:
        proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "BENCH_OUT": str(out)})  # fmt: skip
        lines = []
        deadline = t0 + timeout
        assert proc.stdout is not None
        for line in proc.stdout:  # progress as it happens; the last lines explain a failure
            print(line, end="", flush=True)
            lines = (lines + [line])[-40:]
            if time.time() > deadline:
                proc.kill()
                break
        rc = proc.wait()
        err_tail = _tail("".join(lines))
        status = "ok" if rc == 0 else ("timeout" if time.time() > deadline else f"exit {rc}")
    except OSError as e:
        status, err_tail = "failed", str(e)
    secs = time.time() - t0
    path = out / f"{name}.json"
    fresh = path.is_file() and path.stat().st_mtime >= t0 - 1
    if not fresh:
        _report.write_status(name, "failed", f"{status}: {err_tail}" if err_tail else status, out)
    return status, secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated script names (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated script names to leave out")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per script before it is killed")
    ap.add_argument("--out", type=Path, default=_report.OUT_DIR, help="where the JSON files go")
    ap.add_argument("--list", action="store_true", help="print the scripts that would run and exit")
    ap.add_argument("--readme", type=Path, default=None,
                    help="a README whose <!-- bench-table --> block is regenerated from --out (make bench: README.md)")
    ap.add_argument("--scripts", type=Path, default=HERE, help=argparse.SUPPRESS)  # tests: another folder
    a = ap.parse_args()
    names = names_all = scripts(a.scripts)
    unknown = [n for n in (a.only + "," + a.skip).split(",") if n and n not in names]
    if unknown:
        print(f"error: unknown benchmark(s) {', '.join(unknown)} (have: {', '.join(names)})", file=sys.stderr)
        return 2
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    names = [n for n in names if n not in a.skip.split(",")]
    if a.list:
        print("\n".join(names))
        return 0
    out = a.out
    (out / "previous").mkdir(parents=True, exist_ok=True)
    for n in names:  # keep the last run of what is about to be re-measured, for comparison
        if (out / f"{n}.json").is_file():
            shutil.move(out / f"{n}.json", out / "previous" / f"{n}.json")
    took = {n: run_one(n, out, a.timeout, a.scripts) for n in names}
    print("\n=== benchmark run:", ", ".join(f"{n} {s} ({t:.0f}s)" for n, (s, t) in took.items()))
    print(_report.table(_report.collect(out), _report.collect(out / "previous")))
    if a.readme is not None and _report.update_readme(a.readme, _report.markdown(_report.collect(out), names_all)):
        print(f"the benchmark table in {a.readme} now shows {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
