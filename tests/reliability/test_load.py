"""Load: the web job on ten times the sample, and the validation of 55 environments in one run,
each through its own command line, with peak memory and disk measured (``make load``).

Web: the demo's sample of real Python documentation pages (the first 120 of the ~530 that
``make data-web`` filters), each written ten times (copy 0 as is, copies 1-9 edited: a paragraph
dropped, one added, the title and the numbers changed, seeded), so near-duplicates and distinct
pages mix as in a crawl; ``LOAD_WEB_PAGES`` / ``LOAD_WEB_COPIES`` change the size. Validation: 55 real
two-commit Python repositories (``samples/swe_envs/lang_repos``: a bug, its test, its fix), each
its own repo-version, so 55 images are built (their base layers come from the engine's cache)
and 110 test runs happen in containers.

Measured: peak RSS of the job's whole process tree (the driver, datatrove workers, the served
LLM; containers run inside the engine and are bounded by ``sandbox`` limits, not counted),
peak disk of its output directory, and the engine's growth (``docker system df``). Every input
must be accounted for: web pages as kept + rejected in ``job.json``; instances as validated +
failed with a reason. Long run only: minutes of CPU (web) and Docker (validation).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.reliability.kill import ROOT, parquet_rows
from tests.reliability.ledger import LEDGER, LONG

pytestmark = pytest.mark.skipif(not LONG, reason="load runs are part of `make load` (minutes of CPU and Docker)")
# the demo's web sample (configs/demo.yaml: 120 of the ~530 documentation pages) ten times;
# LOAD_WEB_PAGES=0 takes all ~530 pages (5,300 documents: hours of CPU on two shared cores)
SAMPLE_PAGES = int(os.environ.get("LOAD_WEB_PAGES", "120"))
COPIES = int(os.environ.get("LOAD_WEB_COPIES", "10"))
ENVIRONMENTS = int(os.environ.get("LOAD_ENVIRONMENTS", "55"))
VALIDATE = f"load: validate {ENVIRONMENTS} environments"


def _tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def measured_run(args: list[str], out: Path, timeout: float) -> dict:
    """Run ``python ARGS`` in its own session; sample its process tree's RSS (0.5 s) and OUT's
    size (5 s); return the peaks, the wall time and the exit code."""
    t0 = time.monotonic()
    log = out.with_name(out.name + ".log")
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        peak_rss = peak_disk = 0
        last_du = 0.0
        while proc.poll() is None:
            peak_rss = max(peak_rss, _tree_rss(proc.pid))
            if time.monotonic() - last_du > 5:
                peak_disk, last_du = max(peak_disk, _du(out)), time.monotonic()
            if time.monotonic() - t0 > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"{args[:3]} ran past {timeout}s; log: {log}")
            time.sleep(0.5)
    peak_disk = max(peak_disk, _du(out))
    tail = log.read_text(errors="replace")[-3000:]
    assert proc.returncode == 0, f"{args[:3]} exited {proc.returncode}:\n{tail}"
    return {"peak_rss_mib": round(peak_rss / 2**20), "peak_output_mib": round(peak_disk / 2**20, 1),
            "final_output_mib": round(_du(out) / 2**20, 1), "seconds": round(time.monotonic() - t0)}


# -- web x10 ---------------------------------------------------------------------------------------

def _edited(html: str, rng: random.Random, k: int) -> str:
    """One of the nine edited copies: drop a paragraph, add one, retitle, change the numbers."""
    paras = list(re.finditer(r"<p>.*?</p>", html, flags=re.S))
    if paras:
        drop = rng.choice(paras)
        html = html[: drop.start()] + html[drop.end():]
    words = re.findall(r"[A-Za-z]{5,}", html[-20000:]) or ["edition"]
    added = " ".join(rng.choice(words) for _ in range(40))
    html = re.sub(r"(<body[^>]*>)", lambda m: f"{m.group(1)}<p>Mirror {k}: {added}.</p>", html, count=1)
    html = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} (copy {k})</title>", html, count=1, flags=re.S)
    return re.sub(r"\b(\d)\b", lambda m: str((int(m.group(1)) + k) % 10), html)


def sample_pages(src: Path, n: int) -> list[Path]:
    """The first ``n`` pages in path order (what the demo's ``max_html_pages`` reads); 0: all."""
    from pipelines.inputs import InputSpec, list_input_files

    spec = InputSpec(path=str(src), source="python-docs", glob="*.html", max_files=n or None)
    return [Path(f.path) for f in list_input_files([spec])]


def synthesise_pages(src: Path, dest: Path, copies: int, n: int, seed: int = 20) -> int:
    rng = random.Random(seed)
    pages = sample_pages(src, n)
    for page in pages:
        html = page.read_text(encoding="utf-8", errors="replace")
        rel = page.relative_to(src)
        for k in range(copies):
            target = dest / f"copy-{k}" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(html if k == 0 else _edited(html, rng, k), encoding="utf-8")
    return len(pages) * copies


def unaccounted(counts: dict, pages: int) -> int:
    """Documents not kept or rejected with a reason anywhere: the read stage must see every page,
    every stage's in must be its kept + rejected, and each stage must start from the last's kept."""
    stages = list(counts.values())
    lost = abs(pages - stages[0]["docs_in"])
    for prev, cur in zip([None, *stages], stages, strict=False):
        lost += abs(cur["docs_in"] - cur["kept"] - cur["rejected"])
        if prev is not None and "docs_in" in prev:
            lost += abs(cur["docs_in"] - prev["kept"])
    return lost


@pytest.mark.area("load: web x10")
@pytest.mark.timeout(7200)
def test_web_job_on_ten_times_the_sample(sample_corpus, tmp_path):
    pages = synthesise_pages(sample_corpus.html_dir, tmp_path / "pages", COPIES, SAMPLE_PAGES)
    out = tmp_path / "web"
    input_mib = round(_du(tmp_path / "pages") / 2**20)
    args = ["-m", "pipelines", "web", "--config", "configs/web.yaml", "--input", str(tmp_path / "pages"),
            "--glob", "*.html", "--source", "python-docs", "--output", str(out),
            "--set", f"edu.score.llm.cache_dir={tmp_path / 'llm_cache'}"]
    fig = measured_run(args, out, timeout=7000)
    job = json.loads((out / "job.json").read_text())
    lost = unaccounted(job["counts"], pages)
    lost += abs(len(parquet_rows(out, "documents")) - job["kept"])  # what job.json says was written, was
    LEDGER.add("load: web x10", tried=pages, lost=lost)
    LEDGER.figure("load: web x10", pages=pages, input_mib=input_mib, kept=job.get("kept"), **fig)
    print(f"web x{COPIES}: {pages} pages ({input_mib} MiB) {fig} kept {job.get('kept')}")
    assert lost == 0, job["counts"]


# -- 55 environments -------------------------------------------------------------------------------

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


@pytest.mark.area(VALIDATE)
@pytest.mark.timeout(7200)
def test_validating_55_environments_in_one_run(docker_engine, tmp_path):
    from samples.swe_envs.lang_repos import load, make_repo

    spec = load("python")
    instances = [make_repo(tmp_path / "repos", spec, f"load-python-{i:02d}") for i in range(ENVIRONMENTS)]
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    out = tmp_path / "validate"
    before = _docker_df()
    args = ["-m", "swe_envs", "validate", "--instances", str(tmp_path / "instances.jsonl"),
            "--repos", str(tmp_path / "repos"), "--output", str(out)]
    fig = measured_run(args, out, timeout=7000)
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
    LEDGER.add(VALIDATE, tried=len(instances), lost=lost)
    LEDGER.figure(VALIDATE, environments=len(envs), validated=len(validated),
                  failed=len(failures), env_layers_mib=round(layers / 2**20), engine_growth_mib_upper=engine,
                  containers_left=len(left), **fig)
    print(f"validate: {len(instances)} instances, {len(envs)} environments, {fig}, layers {layers}, engine {engine}")
    assert lost == 0 and not left
    assert all(r.get("reason") for r in failures), failures[:3]
    assert len(envs) == ENVIRONMENTS
