"""The web, dedup and swe-mine jobs on a real Spark standalone cluster: a master and one worker
started with pyspark's own ``spark-class`` on 127.0.0.1, the worker in its own work directory,
the jobs started from a third directory (no checkout) with relative paths and the default cache. Outputs
must equal the local engine's; models reach executors through ``SparkContext.addFile``, and
executors call the job's LLM server at the driver's address (``spark.driver.host``, set to
127.0.0.2 so that a server left on 127.0.0.1 would be caught)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import duckdb
import pytest

from tests.pipelines.jobs.test_defaults import SHORT_PAGES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark

# small and cheap, the same for both engines: a 20K-bucket DCLM model (not 800 MB), two
# documents scored by the LLM, no LLM cache (so the cluster's executors really call it)
WEB_SET = ["dclm.train.bucket=20000", "edu.llm_sample_docs=2", "edu.score.llm.cache_dir=null",
           "dclm.keep_top_fraction=0.5", "local.tasks=2", "spark.input_partitions=2"]
DRIVER_HOST = "127.0.0.2"  # loopback too, but not the 127.0.0.1 a local server would bind


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[2]} exited {proc.returncode}:\n{path.read_text()[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no {text!r} in {path} after {timeout}s:\n{path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a standalone master + one worker; both stopped by pid."""
    import pyspark

    home = Path(pyspark.__file__).parent
    base = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    procs = []
    try:
        log = base / "master.log"
        procs.append(subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            cwd=base, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT))
        _wait_for(log, "I have been elected leader", procs[0])
        work = base / "worker"
        work.mkdir()
        wlog = base / "worker.log"
        procs.append(subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
             f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2", "--memory", "3g",
             "--work-dir", str(work), "--webui-port", str(_free_port())],
            cwd=work, env=env, stdout=open(wlog, "w"), stderr=subprocess.STDOUT))
        _wait_for(wlog, "Successfully registered with master", procs[1])
        yield {"master": f"spark://127.0.0.1:{port}", "work": work}
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def driver_dir(sample_corpus, tmp_path_factory):
    """A working directory that is neither the repo nor the worker's: relative paths in it."""
    from core.cache import cache_dir
    from samples.swe_mine.build import build_sample

    build_sample()  # recorded GitHub data + sample clones, in the cache
    d = tmp_path_factory.mktemp("driver")
    (d / "inputs").symlink_to(cache_dir())  # the mining inputs, by relative path
    pages = d / "pages"
    pages.mkdir()
    for rel in SHORT_PAGES:
        (pages / rel.replace("/", "-")).write_bytes((sample_corpus.html_dir / rel).read_bytes())
    return d


def run(cwd: Path, *args: str) -> str:
    env = os.environ | {"PYSPARK_PYTHON": sys.executable}
    res = subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


def rows(glob: Path, cols: str) -> list[tuple]:
    q = f"SELECT {cols} FROM read_parquet('{glob}', union_by_name=true) ORDER BY ALL"
    return duckdb.connect().execute(q).fetchall()


def test_web_dedup_and_swe_mine_on_a_standalone_cluster_equal_the_local_engine(cluster, driver_dir):
    sets = [a for s in WEB_SET for a in ("--set", s)]
    run(driver_dir, "web", "--input", "pages", "--output", "web-local", *sets)
    out = run(driver_dir, "web", "--input", "pages", "--output", "web-cluster", "--master", cluster["master"], *sets,
              "--set", f'spark.conf={{"spark.driver.host": "{DRIVER_HOST}"}}')
    local = json.loads((driver_dir / "web-local" / "job.json").read_text())
    remote = json.loads((driver_dir / "web-cluster" / "job.json").read_text())
    assert remote["engine"] == "spark" and remote["counts"] == local["counts"]
    assert remote["corpus"]["llm_sample_docs"] == 2 and remote["corpus"]["llm_unscored_docs"] == 0
    # executors called the server at the driver's address, not at a loopback only it can see
    assert f"serving smollm2-135m-instruct on http://{DRIVER_HOST}:" in out
    for sub, cols in (("documents/*.parquet", "id, text, metadata"), ("rejects/**/*.parquet", "id, stage, reason")):
        assert rows(driver_dir / "web-local" / sub, cols) == rows(driver_dir / "web-cluster" / sub, cols), sub
    # the models travelled through Spark: the worker's own directory holds its copies
    shipped = {p.name.split("-", 1)[1] for p in cluster["work"].rglob("*") if p.suffix in (".bin", ".ftz")}
    assert {"lid.176.ftz", "dclm.bin"} <= shipped

    docs = "web-local/phases/1-quality/documents"
    run(driver_dir, "dedup", "--input", docs, "--output", "dedup-local")
    run(driver_dir, "dedup", "--input", docs, "--output", "dedup-cluster", "--master", cluster["master"])
    for sub, cols in (("documents/*.parquet", "id, text, minhash_cluster"), ("rejects/**/*.parquet", "id, reason")):
        assert rows(driver_dir / "dedup-local" / sub, cols) == rows(driver_dir / "dedup-cluster" / sub, cols), sub

    swe = ["--events", "inputs/swe/events", "--api", "inputs/github3/cassettes", "--repos", "inputs/swe/repos",
           "--set", "pack_shards=false"]
    run(driver_dir, "swe-mine", *swe, "--output", "swe-local")
    run(driver_dir, "swe-mine", *swe, "--output", "swe-cluster", "--master", cluster["master"])
    for sub, cols in (("documents/*.parquet", "id, text, metadata"), ("rejects/*.parquet", "id, stage, reason")):
        assert rows(driver_dir / "swe-local" / sub, cols) == rows(driver_dir / "swe-cluster" / sub, cols), sub
    local_inst = (driver_dir / "swe-local" / "instances.jsonl").read_bytes()
    assert local_inst and local_inst == (driver_dir / "swe-cluster" / "instances.jsonl").read_bytes()


def test_spark_submit_with_the_package_zipped_runs_the_job_on_the_cluster(cluster, driver_dir):
    """The README's spark-submit recipe: the packages as a --py-files zip, the CLI's entry file,
    no job --master (spark-submit's is used, not the local engine). The venv here has the package
    installed too, so this proves the command and the master hand-over, not the zip alone."""
    import pyspark

    with zipfile.ZipFile(driver_dir / "glm5_recipe.zip", "w") as zf:
        for pkg in ("core", "filters", "pipelines", "synth", "swe_envs", "training", "moe_kernels"):
            for f in (ROOT / pkg).rglob("*.py"):
                zf.write(f, f.relative_to(ROOT))
    run(driver_dir, "documents", "--input", "pages", "--output", "docs-local")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    res = subprocess.run([str(submit), "--master", cluster["master"], "--py-files", "glm5_recipe.zip",
                          str(ROOT / "pipelines" / "__main__.py"), "documents", "--input", "pages", "--output",
                          "docs-submit"], cwd=driver_dir, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert json.loads((driver_dir / "docs-submit" / "job.json").read_text())["engine"] == "spark"
    for sub, cols in (("documents/*.parquet", "id, text, metadata"), ("rejects/**/*.parquet", "id, stage, reason")):
        assert rows(driver_dir / "docs-local" / sub, cols) == rows(driver_dir / "docs-submit" / sub, cols), sub


def test_documents_job_on_the_cluster_reads_and_writes_s3(cluster, driver_dir, tmp_path):
    """``s3://`` input and output on the standalone cluster, against moto's real S3 server: the worker
    (started before any AWS variable was set) reads the objects with the driver's settings, which
    travel with its tasks; the output is staged on the driver (one machine here: a shared directory)
    and uploaded. Counts and documents equal the local engine's run on the same pages."""
    import fsspec
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        aws = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true"}
        fs = fsspec.filesystem("s3", skip_instance_cache=True, endpoint_url=aws["AWS_ENDPOINT_URL"], key="testing",
                               secret="testing")
        fs.mkdir("cluster")
        for p in sorted((driver_dir / "pages").iterdir()):
            fs.put_file(str(p), f"cluster/in/{p.name}")
        run(driver_dir, "documents", "--input", "pages", "--output", "s3-docs-local", "--set", "local.tasks=2")
        env = os.environ | aws | {"PYSPARK_PYTHON": sys.executable}
        res = subprocess.run([sys.executable, "-m", "pipelines", "documents", "--input", "s3://cluster/in/",
                              "--output", "s3://cluster/out", "--staging", str(tmp_path / "staging"),
                              "--master", cluster["master"], "--set", "spark.input_partitions=2",
                              "--set", f'spark.conf={{"spark.driver.host": "{DRIVER_HOST}"}}'],
                             cwd=driver_dir, env=env, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        local = json.loads((driver_dir / "s3-docs-local" / "job.json").read_text())
        remote = json.loads(fs.cat("cluster/out/job.json"))
        assert remote["engine"] == "spark" and remote["counts"] == local["counts"]
        fs.get("cluster/out/", str(tmp_path / "fetched"), recursive=True)
        cols = "regexp_extract(id, '[^/]*$') AS name, text"  # ids carry the source (a path vs a URL)
        assert rows(tmp_path / "fetched" / "documents" / "*.parquet", cols) == \
            rows(driver_dir / "s3-docs-local" / "documents" / "*.parquet", cols)
    finally:
        server.stop()
