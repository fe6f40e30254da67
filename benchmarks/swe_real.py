"""SWE environments on real repositories: the 20 SWE-bench Verified instances in shared/swe-real.

Runs what a user runs, with the shipped defaults (no --config):
``python -m swe_envs validate --instances I --repos DATA --output OUT/validate`` (the git bundles
are cloned by ``--repos`` itself), then ``python -m swe_envs evaluate --instances
OUT/validate/validated.jsonl --predictions gold``. Measures: environments built, instances
whose FAIL_TO_PASS and PASS_TO_PASS equal SWE-bench's gold lists exactly, gold patches resolved
under ``evaluate``, seconds and image bytes per environment.

Headline: the fraction of instances with gold F2P/P2P reproduced exactly, against the named
baseline "SWE-bench harness, reported gold reproducibility 99.78%" (its own Docker images);
goal ratio 0.9 (>= 18 of 20 exact, given the baseline). Run:
``python benchmarks/swe_real.py [--data ../shared/swe-real] [--only ID,ID] [--out out/bench/swe_real]``.
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

from benchmarks._report import Result, write, write_status  # noqa: E402
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the instances JSONL and git bundles")
    ap.add_argument("--only", default="", help="comma-separated instance ids (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench" / "swe_real")
    ap.add_argument("--timeout", type=float, default=7200)
    args = ap.parse_args()
    src = args.data / "swebench_verified_pytest_flask.jsonl"
    if not src.is_file():
        write_status(__file__, "skipped", f"no real instances at {src}")
        return 0
    rows = _jsonl(src)
    if args.only:
        keep = set(args.only.split(","))
        rows = [r for r in rows if r["instance_id"] in keep]
    args.out.mkdir(parents=True, exist_ok=True)
    instances = args.out / "instances.jsonl"
    write_jsonl_atomic(instances, rows)
    gold = {r["instance_id"]: (sorted(json.loads(r["FAIL_TO_PASS"])), sorted(json.loads(r["PASS_TO_PASS"])))
            for r in rows}
    t0 = time.monotonic()
    proc = _cli("validate", "--instances", str(instances), "--repos", str(args.data), "--output",
                str(args.out / "validate"), "--overwrite", timeout=args.timeout)
    validate_s = time.monotonic() - t0
    if proc.returncode != 0:
        write_status(__file__, "failed", f"validate exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return 1
    validated = {r["instance_id"]: r for r in _jsonl(args.out / "validate" / "validated.jsonl")}
    failures = {r["instance_id"]: r for r in _jsonl(args.out / "validate" / "failures.jsonl")}
    envs = _jsonl(args.out / "validate" / "environments.jsonl")
    per_instance = {}
    for iid, (f2p, p2p) in gold.items():
        rec = validated.get(iid)
        if rec is None:
            per_instance[iid] = {"validated": False, "reason": failures.get(iid, {}).get("reason", "?")[:300]}
            continue
        ours_f, ours_p = sorted(json.loads(rec["FAIL_TO_PASS"])), sorted(json.loads(rec["PASS_TO_PASS"]))
        per_instance[iid] = {
            "validated": True, "f2p_exact": ours_f == f2p, "p2p_exact": ours_p == p2p,
            "f2p_missing": sorted(set(f2p) - set(ours_f))[:10], "f2p_extra": sorted(set(ours_f) - set(f2p))[:10],
            "p2p_missing": sorted(set(p2p) - set(ours_p))[:10], "p2p_extra": sorted(set(ours_p) - set(p2p))[:10],
            "python": (rec.get("environment", {}).get("toolchain") or {}).get("version"),
        }
    exact = sum(1 for v in per_instance.values() if v.get("f2p_exact") and v.get("p2p_exact"))
    built_instances = sum(1 for iid in gold if iid in validated or failures.get(iid, {}).get("stage") not in
                          ("environment", "repository", "read", None))
    ok_envs = [e for e in envs if e["ok"]]
    t1 = time.monotonic()
    proc = _cli("evaluate", "--instances", str(args.out / "validate" / "validated.jsonl"), "--predictions", "gold",
                "--output", str(args.out / "evaluate"), "--overwrite", timeout=args.timeout)
    evaluate_s = time.monotonic() - t1
    report = json.loads((args.out / "evaluate" / "report.json").read_text()) if proc.returncode == 0 else {}
    resolved = len(report.get("resolved_ids", []))
    n = len(gold)
    inputs = {"instances": n, "data": str(args.data), "repo_versions": len(envs), "config": "shipped defaults",
              "per_instance": per_instance}
    headline = Result("swe_real_gold_exact", exact / n, SWEBENCH_GOLD, "fraction of instances", goal=0.9,
                      ours_label=f"{exact}/{n} with gold FAIL_TO_PASS and PASS_TO_PASS reproduced exactly",
                      baseline_label="SWE-bench harness, reported gold reproducibility (99.78%)")
    also = [
        Result("swe_real_envs_built", len(ok_envs) / max(len(envs), 1), 1.0, "fraction of repo-versions", goal=0.9,
               ours_label=f"{len(ok_envs)}/{len(envs)} environments; {built_instances}/{n} instances on a built one",
               baseline_label="every environment"),
        Result("swe_real_gold_resolved", resolved / max(len(validated), 1), 1.0, "fraction of validated", goal=1.0,
               ours_label=f"evaluate --predictions gold: {resolved}/{len(validated)} resolved",
               baseline_label="every validated instance"),
        Result("swe_real_seconds_per_env", sum(e["seconds"] for e in envs) / max(len(envs), 1), validate_s,
               "s", higher_is_better=False, ours_label="mean build seconds per environment",
               baseline_label="the whole validate run (builds + 2x2 test runs per instance)",
               extra={"evaluate_s": round(evaluate_s, 1)}),
        Result("swe_real_bytes_per_env", sum(e["env_layer_bytes"] for e in ok_envs) / max(len(ok_envs), 1),
               sum(e["image_bytes"] for e in ok_envs) / max(len(ok_envs), 1), "bytes", higher_is_better=False,
               ours_label="layer bytes a repo-version adds to its toolchain image",
               baseline_label="whole image bytes (toolchain included)"),
    ]
    write(__file__, headline, inputs, also)
    return 0


if __name__ == "__main__":
    sys.exit(main())
