r"""The whole web job at real volume: ~12,900 distinct real HTML pages in 8 WARC files
(``python -m samples web-volume``: nine Debian packages' HTML documentation) through
``python -m pipelines web --input DIR --output OUT`` with its defaults, on datatrove's local
executor and on Spark ``--master local[2]``, each run measured as a whole process tree.

Per stage (from the job's own ``OUT/job.json``: counts and ``timings``, each stage's own time
summed over its tasks): documents in, kept, keep rate and the reasons of the rejects, CPU seconds,
documents and MB of input text per CPU second. Per run: wall time, CPU seconds of the whole tree
(the workers, the driver's corpus passes and DCLM training, the served LLM, Spark's JVM), peak RSS
of the tree, output disk, and where the wall time went (phases vs the corpus passes between them,
dated by the job's own log lines). Then, on paper, a crawl of ``--crawl-tb`` TB of WARC files from
these rates: core-hours = crawl bytes / (WARC bytes per CPU second), and hours on ``--cores``
cores at perfect scaling.

Rates per core use CPU time (the machine is shared and loaded: wall time measures the wait for a
core as much as the work). The one departure from the defaults: the LLM's answer cache goes to a
fresh folder per run (``--set edu.score.llm.cache_dir=``), so each run scores its sample itself.
The headline is the whole job's pages per wall second, Spark ``local[2]`` vs datatrove local (no
goal); ``also`` compares the two engines' WARC MB per CPU second. Writes
out/bench/web_volume.json. Run: ``python benchmarks/web_volume.py [--engines local,spark]
[--concurrent]`` (``--concurrent``: both engines at once, each measured as its own tree).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._proctree import Measured, measure  # noqa: E402
from benchmarks._report import Result, write  # noqa: E402

ENGINES = {"local": [], "spark": ["--master", "local[2]"]}
PHASE_LINE = re.compile(r"── phase (\d+): (\S+)")
JOB_LINE = re.compile(r"(── |   \S|kept \d)")  # the web job's own progress lines (not datatrove's stats)
# what the web job does between its per-document phases (pipelines/jobs/web.py)
GAPS = ("start-up and preflight (inputs, models, counting DCLM negatives)",
        "corpus: template lines, MinHash clusters, DCLM training",
        "corpus: DCLM threshold, the LLM's sample, serving the LLM",
        "corpus: distilling the LLM's scores into fastText",
        "summary and shutdown")


def stage_rows(job: dict) -> list[dict]:
    """One row per stage of a web ``job.json``: counts, keep rate, top reasons, CPU rates."""
    rows = []
    for stage in job["stages"]:
        c = job["counts"][stage]
        t = job.get("timings", {}).get(stage, {})
        cpu, wall, nbytes = t.get("cpu_seconds", 0.0), t.get("seconds", 0.0), t.get("bytes_in", 0)
        reasons = sorted(c["reasons"].items(), key=lambda kv: -kv[1])
        rows.append({"stage": stage, "in": c["docs_in"], "kept": c["kept"],
                     "keep_rate": round(c["kept"] / c["docs_in"], 4) if c["docs_in"] else None,
                     "reasons": dict(reasons), "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                     "mb_in": round(nbytes / 1e6, 2),
                     "docs_per_cpu_s": round(c["docs_in"] / cpu, 1) if cpu > 0 else None,
                     "mb_per_cpu_s": round(nbytes / 1e6 / cpu, 3) if cpu > 0 else None})
    return rows


def wall_breakdown(lines: list[tuple[float, str]], phase_seconds: list[float], total: float) -> dict[str, float]:
    """Where the wall time went: each phase (its engine's own timing) and each stretch between
    phases (the job's "── phase N" log lines date the phases' starts)."""
    starts = [t for t, line in lines if PHASE_LINE.search(line)]
    if len(starts) != len(phase_seconds):
        return {}
    out, prev_end = {}, 0.0
    for i, (start, secs) in enumerate(zip(starts, phase_seconds, strict=True)):
        out[GAPS[min(i, len(GAPS) - 1)]] = round(max(start - prev_end, 0.0), 1)
        out[f"phase {i + 1}"] = round(secs, 1)
        prev_end = start + secs
    out[GAPS[-1]] = round(max(total - prev_end, 0.0), 1)
    return out


def crawl_arithmetic(cpu_seconds: float, warc_bytes: int, crawl_bytes: float, cores: int) -> dict:
    """From a measured cost (CPU seconds for ``warc_bytes`` of WARC) to a crawl of ``crawl_bytes``:
    bytes per CPU second is bytes per core-second, so core-hours = crawl / rate / 3600."""
    rate = warc_bytes / cpu_seconds
    core_hours = crawl_bytes / rate / 3600
    return {"warc_mb_per_core_s": round(rate / 1e6, 4), "core_hours": round(core_hours),
            "cores": cores, "hours": round(core_hours / cores, 1), "days": round(core_hours / cores / 24, 2)}


def run_engine(engine: str, warcs: Path, out: Path, timeout: float, log=print) -> tuple[Measured, dict]:
    """The web job through its command line, as a user runs it, measured; and its job.json."""
    shutil.rmtree(out, ignore_errors=True)  # a clean run: disk is measured from nothing
    cmd = [sys.executable, "-m", "pipelines", "web", "--input", str(warcs), "--output", str(out / "job"),
           *ENGINES[engine], "--set", f"edu.score.llm.cache_dir={out / 'llm_cache'}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    load_before = os.getloadavg()
    m = measure(cmd, out, timeout, cwd=ROOT, env=env,
                echo=lambda line: log(f"[{engine}] {line}") if JOB_LINE.match(line) else None)
    if m.returncode != 0:
        raise SystemExit(f"{engine}: the web job exited {m.returncode}:\n{m.tail()}")
    job = json.loads((out / "job" / "job.json").read_text())
    model = out / "job" / "models" / "dclm.bin"  # trained by the job: fastText's 2M buckets, whatever the corpus
    job["_dclm_model_bytes"] = model.stat().st_size if model.is_file() else 0
    job["_load_avg"] = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
    return m, job


def summarise(engine: str, m: Measured, job: dict, manifest: dict, crawl_bytes: float, cores: int) -> dict:
    rows = stage_rows(job)
    stage_cpu = sum(r["cpu_seconds"] for r in rows)
    pages, warc_bytes = manifest["pages"], manifest["warc_bytes"]
    phases = list(job.get("phase_seconds", {}).values())
    return {
        "engine": engine, "pages": pages, "kept": job["kept"], "wall_s": m.seconds, "tree_cpu_s": m.cpu_seconds,
        "stage_cpu_s": round(stage_cpu, 1), "pages_per_wall_s": round(pages / m.seconds, 2),
        "peak_rss_mib": round(m.peak_rss_bytes / 2**20), "peak_process_rss_mib": round(m.peak_process_rss_bytes / 2**20),
        "peak_output_mib": round(m.peak_output_bytes / 2**20), "final_output_mib": round(m.final_output_bytes / 2**20),
        "dclm_model_mib": round(job["_dclm_model_bytes"] / 2**20),
        "load_avg": job["_load_avg"], "wall": wall_breakdown(m.lines, phases, m.seconds),
        "corpus": {k: job["corpus"].get(k) for k in ("dclm_threshold", "dclm_training", "llm_sample_docs",
                                                       "edu_distillation", "minhash", "template_lines")},
        "stages": rows,
        # on paper: the per-document stages alone (what grows with the crawl), and the whole tree
        # (one-off work too: DCLM training, the CPU-served LLM, Spark's JVM) as an upper bound
        "crawl_stages": crawl_arithmetic(stage_cpu, warc_bytes, crawl_bytes, cores),
        "crawl_tree": crawl_arithmetic(m.cpu_seconds, warc_bytes, crawl_bytes, cores),
        "crawl_per_stage_core_hours": {r["stage"]: round(crawl_bytes / warc_bytes * r["cpu_seconds"] / 3600)
                                       for r in rows},
    }


def print_run(s: dict) -> None:
    print(f"\n{s['engine']}: {s['pages']:,} pages -> {s['kept']:,} kept; wall {s['wall_s']:.0f} s, CPU {s['tree_cpu_s']:.0f} s "
          f"(stages {s['stage_cpu_s']:.0f} s); peak RSS {s['peak_rss_mib']:,} MiB (largest process "
          f"{s['peak_process_rss_mib']:,}); output {s['final_output_mib']:,} MiB; load {s['load_avg']}")
    head = (f"{'stage':28s} {'in':>7s} {'kept':>7s} {'keep':>6s} {'task s':>8s} {'CPU s':>8s} {'docs/CPU-s':>10s} "
            f"{'MB in':>8s} {'MB/CPU-s':>8s}  rejects")
    print(head + "\n" + "-" * len(head))
    for r in s["stages"]:
        keep = f"{r['keep_rate']:.1%}" if r["keep_rate"] is not None else "-"
        top = ", ".join(f"{k} {v}" for k, v in list(r["reasons"].items())[:3])
        print(f"{r['stage']:28s} {r['in']:7,d} {r['kept']:7,d} {keep:>6s} {r['seconds']:8.1f} {r['cpu_seconds']:8.1f} "
              f"{r['docs_per_cpu_s'] or 0:10.1f} {r['mb_in']:8.1f} {r['mb_per_cpu_s'] or 0:8.3f}  {top}")
    print("wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in s["wall"].items()))
    for key, what in (("crawl_stages", "per-document stages"), ("crawl_tree", "whole process tree")):
        c = s[key]
        print(f"crawl on paper ({what}): {c['warc_mb_per_core_s']} WARC MB per core-second -> "
              f"{c['core_hours']:,} core-hours; {c['hours']:,} h ({c['days']} days) on {c['cores']:,} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="local,spark", help="comma-separated: local, spark (local[2])")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "web_volume", help="job outputs")
    ap.add_argument("--max-pages", type=int, default=None, help="at most N pages per package (a quick trial)")
    ap.add_argument("--crawl-tb", type=float, default=100.0, help="crawl size for the arithmetic (TB of WARC)")
    ap.add_argument("--cores", type=int, default=1000, help="cores for the arithmetic")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per run")
    ap.add_argument("--concurrent", action="store_true", help="run the engines at the same time, not one after the other")
    args = ap.parse_args()
    from samples.web_volume import build_web_volume

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    dest = None if args.max_pages is None else args.out / f"warcs-{args.max_pages}"
    volume = build_web_volume(dest=dest, max_pages=args.max_pages, log=log)
    manifest, crawl_bytes = volume.manifest, args.crawl_tb * 1e12
    engines = args.engines.split(",")
    # at once: each run takes hours on a loaded 2-core machine; CPU rates are each tree's own either way
    with ThreadPoolExecutor(len(engines) if args.concurrent else 1) as pool:
        done = {e: pool.submit(run_engine, e, volume.folder, args.out / e, args.timeout, log) for e in engines}
        runs = {e: summarise(e, *done[e].result(), manifest, crawl_bytes, args.cores) for e in engines}
    for run in runs.values():
        print_run(run)
    inputs = {"pages": manifest["pages"], "html_mb": round(manifest["html_bytes"] / 1e6, 1),
              "warc_mb": round(manifest["warc_bytes"] / 1e6, 1), "files": len(manifest["files"]),
              "packages": {k: v["pages"] for k, v in manifest["packages"].items()},
              "crawl_tb": args.crawl_tb, "crawl_cores": args.cores, "engines_at_once": args.concurrent,
              "command": "python -m pipelines web --input WARC_DIR --output OUT [--master local[2]] "
                         "--set edu.score.llm.cache_dir=FRESH"}
    local, spark = runs.get("local"), runs.get("spark")
    ours, base = spark or local, local or spark
    headline = Result("web_volume", ours["pages_per_wall_s"], base["pages_per_wall_s"], "pages/s (whole job, wall)",
                      ours_label=f"web job, {ours['engine']}" + (" --master local[2]" if spark else ""),
                      baseline_label=f"web job, {base['engine']} (datatrove, 2 workers)",
                      notes="wall time on a shared, loaded machine: see each run's load average",
                      extra={"runs": runs})
    also = [Result("web_volume_cpu", manifest["warc_bytes"] / 1e6 / ours["tree_cpu_s"],
                   manifest["warc_bytes"] / 1e6 / base["tree_cpu_s"], "WARC MB/CPU-s",
                   ours_label=f"{ours['engine']}: whole process tree", baseline_label=f"{base['engine']}: whole process tree",
                   notes="CPU seconds of every process of the run (workers, driver, LLM, JVM)")]
    write(__file__, headline, inputs, also)


if __name__ == "__main__":
    main()
