"""SWE environments on real repositories: every SWE-bench Verified set in shared/swe-real.

Each ``swebench_verified_*.jsonl`` there is one set (pytest+flask: 20 instances; sphinx: 44),
run as a user runs it, with the shipped defaults (no --config):
``python -m swe_envs validate --instances I --repos DATA --output OUT/<set>/validate`` (the git
bundles are cloned by ``--repos`` itself), then ``python -m swe_envs evaluate --instances
OUT/<set>/validate/validated.jsonl --predictions gold``. Measures per set: environments built,
instances validated, instances whose FAIL_TO_PASS and PASS_TO_PASS equal SWE-bench's gold lists
exactly (with the reason of every miss), gold patches resolved under ``evaluate``, seconds and
image bytes per environment.

Headline: the fraction of all instances with gold F2P/P2P reproduced exactly, against the named
baseline "SWE-bench harness, reported gold reproducibility 99.78%" (its own Docker images);
goal ratio 0.9. Run: ``python benchmarks/swe_real.py [--data ../shared/swe-real] [--sets sphinx]
[--only ID,ID] [--out out/bench/swe_real] [--reuse EARLIER_OUT ...] [--no-run] [--no-evaluate]``. Each run writes a folder of its
own (``OUT/<set>/<UTC stamp>/``, with ``run.json``: commit, ``RULES_VERSION``, load, seconds); with
``--reuse``, the instances and sets this run leaves out are measured by the newest earlier run that had
them, and every instance's row names the run and the rules it was measured under.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._report import Result, provenance, write, write_status  # noqa: E402
from core.io import read_jsonl, write_jsonl_atomic  # noqa: E402

SWEBENCH_GOLD = 0.9978  # SWE-bench's reported gold-patch reproducibility on its own harness
DEFAULT_DATA = ROOT.parent / "shared" / "swe-real"


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "swe_envs", *args], cwd=ROOT, text=True, capture_output=True,
                          timeout=timeout, env=env)
    print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
    return proc


def _jsonl(path: Path) -> list[dict]:
    """A validate output's records; none when validate did not write the file."""
    return read_jsonl(path, path.name) if path.is_file() else []


def _set_name(path: Path) -> str:
    return path.stem.removeprefix("swebench_verified_")


def run_set(src: Path, data: Path, out: Path, only: set[str], timeout: float, evaluate: bool = True) -> str:
    """validate + evaluate one set (or its ``only`` instances) into ``out``; "" or why validate failed.

    ``out/run.json`` records when, at which commit, under which ``RULES_VERSION`` and load it ran, so a
    report that reuses this run (``--reuse``) says what each instance was measured under."""
    from swe_envs.envs.rules import RULES_VERSION

    rows = _jsonl(src)
    if only:
        rows = [r for r in rows if r["instance_id"] in only]
    out.mkdir(parents=True, exist_ok=True)
    instances = out / "instances.jsonl"
    write_jsonl_atomic(instances, rows)
    run = {"started": provenance(), "rules_version": RULES_VERSION, "instances": [r["instance_id"] for r in rows]}
    t0 = time.monotonic()
    proc = _cli("validate", "--instances", str(instances), "--repos", str(data), "--output",
                str(out / "validate"), "--overwrite", timeout=timeout)
    run["validate_s"] = round(time.monotonic() - t0, 1)
    if evaluate and proc.returncode == 0 and _jsonl(out / "validate" / "validated.jsonl"):
        t1 = time.monotonic()
        _cli("evaluate", "--instances", str(out / "validate" / "validated.jsonl"), "--predictions", "gold",
             "--output", str(out / "evaluate"), "--overwrite", timeout=timeout)
        run["evaluate_s"] = round(time.monotonic() - t1, 1)
    run["finished"] = provenance()
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return "" if proc.returncode == 0 else f"validate exited {proc.returncode}: {proc.stderr.strip()[-300:]}"


def _outcome(iid: str, gold: tuple[list, list], out: Path) -> dict | None:
    """One instance's result in run folder ``out``, or None when that run did not have it."""
    rec = next((r for r in _jsonl(out / "validate" / "validated.jsonl") if r["instance_id"] == iid), None)
    fail = next((r for r in _jsonl(out / "validate" / "failures.jsonl") if r["instance_id"] == iid), None)
    if rec is None and fail is None:
        return None
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else {}
    measured = {"run": str(out), "rules_version": run.get("rules_version", "not recorded"),
                "commit": run.get("started", {}).get("commit", "not recorded"),
                "at": run.get("finished", {}).get("measured_at", "not recorded")}
    if rec is None:
        return {"validated": False, "stage": fail.get("stage"), "reason": fail.get("reason", "?")[:300],
                "measured": measured}
    report = out / "evaluate" / "report.json"  # absent: evaluate did not run (or was stopped) there
    resolved = json.loads(report.read_text()).get("resolved_ids", []) if report.is_file() else None
    f2p, p2p = gold
    ours_f, ours_p = sorted(json.loads(rec["FAIL_TO_PASS"])), sorted(json.loads(rec["PASS_TO_PASS"]))
    return {
        "validated": True, "f2p_exact": ours_f == f2p, "p2p_exact": ours_p == p2p, "resolved": None if resolved is None else iid in resolved,
        "f2p_missing": sorted(set(f2p) - set(ours_f))[:10], "f2p_extra": sorted(set(ours_f) - set(f2p))[:10],
        "p2p_missing": sorted(set(p2p) - set(ours_p))[:10], "p2p_extra": sorted(set(ours_p) - set(p2p))[:10],
        "python": (rec.get("environment", {}).get("toolchain") or {}).get("version"), "measured": measured,
        # what in the after-run log says a gold test failed for want of network (validate is offline)
        "needs_network": (rec.get("validation") or {}).get("needs_network"),
    }


def _exact(outcome: dict) -> bool:
    """Both gold lists reproduced exactly."""
    return bool(outcome.get("f2p_exact") and outcome.get("p2p_exact"))


def run_folders(folder: Path) -> list[Path]:
    """A set's run folders under an --out folder, newest first (a folder that is itself one run too)."""
    if (folder / "validate").is_dir():
        return [folder]
    return sorted((p for p in folder.glob("*") if (p / "validate").is_dir()), reverse=True) if folder.is_dir() else []


def measure_set(src: Path, runs: list[Path]) -> dict:
    """A set's measurements from its run folders, newest first: each instance (and environment) as the
    newest run that had it measured it."""
    gold = {r["instance_id"]: (sorted(json.loads(r["FAIL_TO_PASS"])), sorted(json.loads(r["PASS_TO_PASS"])))
            for r in _jsonl(src)}
    per_instance = {}
    for iid, lists in gold.items():
        per_instance[iid] = next((o for out in runs if (o := _outcome(iid, lists, out))), None) or {
            "validated": False, "stage": "not run", "reason": "in no run folder"}
    envs: dict[str, dict] = {}
    for out in runs:
        for e in _jsonl(out / "validate" / "environments.jsonl"):
            envs.setdefault(e["commit"], e)
    ok_envs = [e for e in envs.values() if e["ok"]]
    # a run folder made before run.json existed: its validate's own summary has the seconds
    timing = [json.loads((o / "run.json").read_text()) if (o / "run.json").is_file() else
              {"validate_s": json.loads(summary.read_text()).get("seconds", 0)} if (summary := o / "validate" /
                                                                                   "summary.json").is_file() else {}
              for o in runs]
    return {
        "instances": len(gold), "environments": len(envs), "environments_built": len(ok_envs),
        "validated": sum(v["validated"] for v in per_instance.values()),
        "gold_exact": sum(1 for v in per_instance.values() if _exact(v)),
        # misses the offline run explains: FAIL_TO_PASS needs network, or a missing gold test's log shows it
        "network_misses": sorted(i for i, v in per_instance.items()
                                 if v.get("stage") == "network" or (v.get("needs_network") and not _exact(v))),
        "gold_resolved": sum(1 for v in per_instance.values() if v.get("resolved")),
        "gold_evaluated": sum(1 for v in per_instance.values() if v.get("resolved") is not None),
        "validate_s": sum(t.get("validate_s", 0) for t in timing), "evaluate_s": sum(t.get("evaluate_s", 0) for t in timing),
        "runs": [str(o) for o in runs],
        "seconds_per_env": round(sum(e["seconds"] for e in envs.values()) / max(len(envs), 1), 1),
        "layer_bytes_per_env": sum(e["env_layer_bytes"] for e in ok_envs) / max(len(ok_envs), 1),
        "image_bytes_per_env": sum(e["image_bytes"] for e in ok_envs) / max(len(ok_envs), 1),
        "environment_failures": [e.get("reason", "")[:300] for e in envs.values() if not e["ok"]],
        "per_instance": per_instance,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the instances JSONL and git bundles")
    ap.add_argument("--sets", default="", help="comma-separated set names, e.g. sphinx,pytest_flask (default: all)")
    ap.add_argument("--only", default="", help="comma-separated instance ids (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench" / "swe_real")
    ap.add_argument("--timeout", type=float, default=14400, help="seconds per validate / evaluate run")
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="an earlier --out folder (repeat, newest first): instances and sets this run leaves out "
                         "are taken from its newest run folders, each with the rules it was measured under")
    ap.add_argument("--no-run", action="store_true", help="run nothing: the report of the --reuse folders alone")
    ap.add_argument("--no-evaluate", action="store_true", help="validate only (gold patches not evaluated)")
    args = ap.parse_args()
    sources = sorted(args.data.glob("swebench_verified_*.jsonl"))
    if args.sets:
        wanted = set(args.sets.split(","))
        sources = [s for s in sources if _set_name(s) in wanted]
    if args.no_run:
        sources = []
    elif not sources:
        write_status(__file__, "skipped", f"no SWE-bench instance sets (swebench_verified_*.jsonl) in {args.data}")
        return 0
    only = set(filter(None, args.only.split(",")))
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    sets, broken = {}, {}
    for src in sorted(args.data.glob("swebench_verified_*.jsonl")):
        name = _set_name(src)
        runs = [run for root in args.reuse for run in run_folders(root / name)]
        if src in sources:
            out = args.out / name / stamp  # each run a folder of its own: later reports may reuse it
            error = run_set(src, args.data, out, only, args.timeout, not args.no_evaluate)
            if error:
                broken[name] = error
            runs.insert(0, out)
        if runs:
            sets[name] = measure_set(src, runs)
    if not sets or (sources and len(broken) == len(sources)):
        write_status(__file__, "failed", "; ".join(f"{k}: {v}" for k, v in broken.items()) or "no set measured")
        return 1
    done = sets
    total = lambda key: sum(v[key] for v in done.values())  # noqa: E731
    n, exact = total("instances"), total("gold_exact")
    table = ", ".join(f"{k}: {v['environments_built']}/{v['environments']} built, {v['validated']}/{v['instances']} "
                      f"validated, {v['gold_exact']}/{v['instances']} exact" for k, v in done.items())
    inputs = {"data": str(args.data), "config": "shipped defaults", "sets": sets, "broken": broken}
    headline = Result("swe_real_gold_exact", exact / max(n, 1), SWEBENCH_GOLD, "fraction of instances", goal=0.9,
                      ours_label=f"{exact}/{n} with gold FAIL_TO_PASS and PASS_TO_PASS reproduced exactly ({table})",
                      baseline_label="SWE-bench harness, reported gold reproducibility (99.78%)")
    also = []
    for name, v in done.items():
        also.append(Result(f"swe_real_{name}_gold_exact", v["gold_exact"] / max(v["instances"], 1), SWEBENCH_GOLD,
                           "fraction of instances", goal=0.9,
                           ours_label=f"{v['gold_exact']}/{v['instances']} exact; {v['validated']} validated; "
                                      f"{v['environments_built']}/{v['environments']} environments",
                           baseline_label="SWE-bench harness, reported gold reproducibility (99.78%)"))
        also.append(Result(f"swe_real_{name}_gold_resolved", v["gold_resolved"] / max(v["gold_evaluated"], 1), 1.0,
                           "fraction of evaluated", goal=1.0,
                           ours_label=f"evaluate --predictions gold: {v['gold_resolved']}/{v['gold_evaluated']} "
                                      f"resolved ({v['validated']} validated)",
                           baseline_label="every validated instance"))
    also.append(Result("swe_real_envs_built", total("environments_built") / max(total("environments"), 1), 1.0,
                       "fraction of repo-versions", goal=0.9,
                       ours_label=f"{total('environments_built')}/{total('environments')} environments",
                       baseline_label="every environment"))
    also.append(Result("swe_real_seconds_per_env",
                       sum(v["seconds_per_env"] * v["environments"] for v in done.values()) / max(total("environments"), 1),
                       total("validate_s"), "s", higher_is_better=False, ours_label="mean build seconds per environment",
                       baseline_label="the whole validate runs (builds + 2x2 test runs per instance)"))
    write(__file__, headline, inputs, also)
    return 0 if not broken else 1


if __name__ == "__main__":
    sys.exit(main())
