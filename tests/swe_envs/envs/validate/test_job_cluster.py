"""``validate --master spark://…`` on a real standalone cluster (master + one worker started with
pyspark's ``spark-class``, the worker in its own work directory), run from a third directory with
relative paths: the executors build and test on the worker's Docker engine (this machine's) and the
driver writes the local pool's rows. Proves that nothing an executor does depends on the driver's
working directory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from samples.swe_envs.lang_repos import PY, make_repo
from tests.pipelines.test_spark_cluster import cluster  # noqa: F401 (the standalone cluster fixture)
from tests.swe_envs.envs.conftest import run_cli, write_jsonl
from tests.swe_envs.envs.validate.test_job import _files, _rows

pytestmark = [pytest.mark.docker, pytest.mark.spark]


def test_validate_on_a_standalone_cluster_equals_the_local_pool(docker_ready, cluster, tmp_path):  # noqa: F811
    driver = tmp_path / "driver"
    good = make_repo(driver / "repos", PY, "fanout")
    write_jsonl(driver / "in.jsonl", [good, dict(good, instance_id="tests__fanout-twin")])
    for out in ("warm", "local"):  # both compared runs find the image the first one may build
        local = run_cli("validate", "--instances", str(driver / "in.jsonl"), "--repos", str(driver / "repos"),
                        "--output", str(driver / out))
        assert local.returncode == 0, local.stdout + local.stderr
    env = os.environ | {"PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-m", "swe_envs", "validate", "--instances", "in.jsonl", "--repos", "repos",
                           "--output", "remote", "--master", cluster["master"]], cwd=driver, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "validated 2, failed 0" in proc.stdout
    for name in ("environments.jsonl", "validated.jsonl", "failures.jsonl"):
        assert _rows(driver / "remote", name) == _rows(driver / "local", name), name
    assert _files(driver / "remote") == _files(driver / "local")
    # the work ran in the worker's executor (its stderr lives in the worker's directory), not in the driver
    assert any(p.name == "stderr" for p in cluster["work"].rglob("*"))
