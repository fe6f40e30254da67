"""Load: the web job on ~12,900 distinct real pages, and the validation of 36 distinct real
repositories in one run, each through its own command line, with peak memory and disk measured
(``make load``).

Web: the HTML documentation of nine Debian packages (Python, PostgreSQL, Django, Sphinx, Git,
Node.js, Boost, Qt 5, libstdc++; ``python -m samples web-volume``), every page distinct by content,
in 8 WARC files with real HTTP headers — run as ``benchmarks/web_volume.py`` runs it (the job's
defaults; ``LOAD_WEB_MASTER=local[2]`` for Spark). Validation: one ``swe_envs validate`` run
over the 20 SWE-bench Verified instances of ../shared/swe-real (flask and pytest at 20 commits of
11 versions, from their git bundles; ``LOAD_SWE_REAL`` elsewhere) and 16 instances made from two
consecutive releases of 16 other real Python projects (``python -m samples release-pairs``: code,
tests and dates upstream's), so 36 distinct repositories of 2013-2023, built with the shipped defaults.

Measured (``benchmarks/_proctree.py``): peak RSS of the job's whole process tree (the driver,
datatrove workers, the served LLM; containers run inside the engine and are bounded by
``sandbox`` limits, not counted), peak disk of its output directory, and the engine's growth
(``docker system df``); for the web job also the keep rate of every stage. Every input must be
accounted for: WARC records as kept + rejected in ``job.json``; instances as validated + failed
with a reason. Long run only: an hour or more of CPU (web) and Docker (validation).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from benchmarks._proctree import measure
from tests.reliability.kill import ROOT
from tests.reliability.ledger import LEDGER, LONG

pytestmark = pytest.mark.skipif(not LONG, reason="load runs are part of `make load` (minutes of CPU and Docker)")
WEB_MASTER = os.environ.get("LOAD_WEB_MASTER", "local")  # or local[2]: the same run on Spark
SWE_REAL = Path(os.environ.get("LOAD_SWE_REAL", ROOT.parent / "shared" / "swe-real"))
WEB = "load: web, distinct real pages"
VALIDATE = "load: validate distinct real repositories"


def measured_run(args: list[str], out: Path, timeout: float) -> dict:
    """Run ``python ARGS`` measured as a process tree (its output kept in OUT.log); the peaks,
    the wall time, and a failure with the log's tail when it exits non-zero."""
    m = measure([sys.executable, *args], out, timeout, cwd=ROOT)
    log = out.with_name(out.name + ".log")
    log.write_text("\n".join(line for _, line in m.lines) + "\n")
    assert m.returncode == 0, f"{args[:3]} exited {m.returncode}:\n{m.tail()}"
    return {"peak_rss_mib": round(m.peak_rss_bytes / 2**20), "peak_output_mib": round(m.peak_output_bytes / 2**20, 1),
            "final_output_mib": round(m.final_output_bytes / 2**20, 1), "seconds": round(m.seconds)}


# -- web: ~12,900 distinct real pages --------------------------------------------------------------

def unaccounted(counts: dict, records: int) -> int:
    """Documents not kept or rejected with a reason anywhere: the read stage must see every
    record, every stage's in must be its kept + rejected, and each stage must start from the last's kept."""
    stages = list(counts.values())
    lost = abs(records - stages[0]["docs_in"])
    for prev, cur in zip([None, *stages], stages, strict=False):
        lost += abs(cur["docs_in"] - cur["kept"] - cur["rejected"])
        if prev is not None and "docs_in" in prev:
            lost += abs(cur["docs_in"] - prev["kept"])
    return lost


@pytest.mark.area(WEB)
@pytest.mark.timeout(5 * 3600)
def test_web_job_on_distinct_real_pages(tmp_path):
    from benchmarks.web_volume import run_engine, summarise
    from samples.web_volume import build_web_volume

    volume = build_web_volume(log=lambda m: print(m, file=sys.stderr))
    manifest = volume.manifest
    records = sum(f["records"] for f in manifest["files"])  # the pages and one warcinfo per file
    engine = "spark" if WEB_MASTER.startswith("local[") else "local"
    m, job = run_engine(engine, volume.folder, tmp_path / "web", 5 * 3600 - 600, log=print)
    s = summarise(engine, m, job, manifest, 100e12, 1000)
    lost = unaccounted(job["counts"], records)
    docs = tmp_path / "web" / "job" / "documents"
    written = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{docs}/*.parquet')").fetchone()[0]
    lost += abs(written - job["kept"])  # what job.json says was written, was
    keep = " ".join(f"{r['stage']}={r['keep_rate']:.3f}" for r in s["stages"] if r["keep_rate"] is not None)
    LEDGER.add(WEB, tried=records, lost=lost)
    LEDGER.figure(WEB, engine=engine, pages=manifest["pages"], html_mib=round(manifest["html_bytes"] / 2**20),
                  warc_mib=round(manifest["warc_bytes"] / 2**20), kept=job["kept"], seconds=round(m.seconds),
                  cpu_seconds=round(m.cpu_seconds), peak_rss_mib=s["peak_rss_mib"],
                  peak_output_mib=s["peak_output_mib"], dclm_model_mib=s["dclm_model_mib"], keep_rates=keep)
    print(f"web: {manifest['pages']} pages, {records} records, {s['wall_s']} s, kept {job['kept']}; {keep}")
    assert lost == 0, job["counts"]
    assert manifest["pages"] >= 10_000


# -- validation: distinct real repositories ------------------------------------------------------

def _docker_df() -> dict[str, int]:
    """Bytes the engine holds per kind (images, containers, build cache), from ``docker system df``."""
    out = subprocess.run(["docker", "system", "df", "--format", "{{json .}}"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    units = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
    sizes = {}
    for line in out.splitlines():
        row = json.loads(line)
        m = re.match(r"([\d.]+)\s*([kKMGT]?B)", row["Size"])
        sizes[row["Type"]] = int(float(m.group(1)) * units[m.group(2)]) if m else 0
    return sizes


def real_instances(tmp: Path) -> tuple[Path, Path, list[dict]]:
    """The load run's instances: the 20 SWE-bench Verified instances of ../shared/swe-real (flask,
    pytest; their git bundles) and one instance per release pair of 16 other real Python projects
    (``python -m samples release-pairs``), in one JSONL, with one --repos folder holding both."""
    from core.cache import cache_dir
    from samples.swe_envs.release_pairs import build_release_pairs

    if not (SWE_REAL / "swebench_verified_pytest_flask.jsonl").is_file():
        pytest.skip(f"no SWE-bench instances at {SWE_REAL}: the load run validates real repositories only")
    pairs = build_release_pairs(cache_dir() / "release-pairs", log=print)
    rows = [json.loads(x) for x in (SWE_REAL / "swebench_verified_pytest_flask.jsonl").read_text().splitlines() if x]
    rows += [json.loads(x) for x in pairs["instances"].read_text().splitlines() if x]
    repos = tmp / "repos"
    repos.mkdir()
    for bundle in SWE_REAL.glob("*.bundle"):
        (repos / bundle.name).symlink_to(bundle.resolve())
    (repos / "pypi").symlink_to((pairs["repos"] / "pypi").resolve())
    (tmp / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp / "instances.jsonl", repos, rows


@pytest.mark.area(VALIDATE)
@pytest.mark.timeout(10800)
def test_validating_real_repositories_in_one_run(docker_engine, tmp_path):
    instances_file, repos, instances = real_instances(tmp_path)
    # distinct repositories: each SWE-bench instance is its repository at its own commit; each
    # release pair is a project of its own
    assert len({(i["repo"], i["base_commit"]) for i in instances}) == len(instances) >= 30
    out = tmp_path / "validate"
    before = _docker_df()
    args = ["-m", "swe_envs", "validate", "--instances", str(instances_file), "--repos", str(repos),
            "--output", str(out)]
    fig = measured_run(args, out, timeout=10000)
    after = _docker_df()
    validated = [json.loads(x) for x in (out / "validated.jsonl").read_text().splitlines() if x.strip()]
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines() if x.strip()]
    envs = [json.loads(x) for x in (out / "environments.jsonl").read_text().splitlines() if x.strip()]
    ids = {r["instance_id"] for r in validated} | {r["instance_id"] for r in failures}
    lost = len({i["instance_id"] for i in instances} - ids)
    # the engine is shared (other jobs build too): its whole growth is an upper bound; the images'
    # own layers (what validate reports per language) are this run's disk
    engine = round(sum(after.get(k, 0) - before.get(k, 0) for k in ("Images", "Containers")) / 2**20)
    summary = json.loads((out / "summary.json").read_text())
    layers = sum(v.get("env_layer_bytes", 0) for v in summary["languages"].values())
    images = {e.get("image") for e in envs}
    left = [i for i in subprocess.run(["docker", "ps", "-a", "--format", "{{.Image}}"], capture_output=True,
                                      text=True, timeout=300).stdout.split() if i in images]
    # SWE-bench's gold lists reproduced exactly (both), as benchmarks/swe_real.py counts them
    lists = ("FAIL_TO_PASS", "PASS_TO_PASS")
    gold = {i["instance_id"]: [sorted(json.loads(i[k])) for k in lists] for i in instances
            if json.loads(i["FAIL_TO_PASS"] or "[]")}
    exact = sum(1 for r in validated if gold.get(r["instance_id"]) == [sorted(json.loads(r[k])) for k in lists])
    reasons: dict[str, int] = {}
    for f in failures:
        key = str(f.get("stage") or f.get("reason", ""))[:60]
        reasons[key] = reasons.get(key, 0) + 1
    why = {f["instance_id"]: f"{f.get('stage')}: {str(f.get('reason'))[:160]}" for f in failures}
    LEDGER.add(VALIDATE, tried=len(instances), lost=lost)
    LEDGER.figure(VALIDATE, repositories=len(instances), environments=len(envs), validated=len(validated),
                  failed=len(failures), failure_stages=reasons, failures=why, swebench_gold_exact=exact,
                  env_layers_mib=round(layers / 2**20), engine_growth_mib_upper=engine, containers_left=len(left),
                  **fig)
    print(f"validate: {len(instances)} instances, {len(envs)} environments, {len(validated)} validated, "
          f"{len(failures)} failed {reasons}, {fig}, layers {layers}, engine {engine}")
    assert lost == 0 and not left
    assert all(r.get("reason") for r in failures), failures[:3]
