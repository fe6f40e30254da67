"""``validate`` and ``evaluate`` on Spark executors (``local[2]``: two executor slots, each talking to
the Docker engine of its machine) write what the local pool writes: the same environments (one per
repo-version, shared by its instances), validated rows, failures, gold results and report, and the
same log files — only timings and the OUT directory named inside rows differ. (The CLI's ``--master``
is run end to end by the terminal check's test: one more Spark JVM here would double this file's time.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samples.swe_envs.lang_repos import PY, make_repo
from tests.swe_envs.envs.conftest import read_jsonl, run_cli, write_jsonl

pytestmark = [pytest.mark.docker, pytest.mark.spark]

TIMINGS = {"seconds", "build_s", "test_s", "elapsed_s", "duration_s", "time_s", "wall_s", "started", "finished"}


def _rows(out: Path, name: str) -> list[str]:
    """Rows without timings, OUT spelled 'OUT', in a stable order."""

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMINGS}
        return [strip(v) for v in x] if isinstance(x, list) else x

    text = (out / name).read_text().replace(str(out), "OUT")
    return sorted(json.dumps(strip(json.loads(line)), sort_keys=True) for line in text.splitlines() if line.strip())


def _files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def batch(docker_ready, tmp_path_factory):
    """Two repo-versions (one with two instances: one image), a test patch that does not apply, a
    repository that does not exist: the local pool's outputs first."""
    root = tmp_path_factory.mktemp("fanout")
    # names of their own: other tests' "tests/good" builds must not race this file's candidates
    good = make_repo(root / "repos", PY, "fanout")
    noapply = make_repo(root / "repos", PY, "fanout-noapply")
    noapply["test_patch"] = noapply["test_patch"].replace("from calc import add\n", "from calc import add, mul\n")
    records = [good, dict(good, instance_id="tests__fanout-twin"), noapply,
               dict(good, instance_id="tests__fanout-ghost-1", repo="tests/fanout-ghost")]
    instances = write_jsonl(root / "in.jsonl", records)
    # the first run may build (a fresh machine) and the next find the image: both compared runs find it
    for out in ("warm", "local"):
        proc = run_cli("validate", "--instances", str(instances), "--repos", str(root / "repos"),
                       "--output", str(root / out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_validate_on_spark_executors_equals_the_local_pool(batch, spark):
    from core.spark import SparkConfig
    from core.spark_engine import SparkEngine
    from swe_envs.config import SweEnvsConfig
    from swe_envs.envs.validate.job import validate_instances

    local, out = batch / "local", batch / "spark"
    res = validate_instances(batch / "in.jsonl", batch / "repos", out, SweEnvsConfig(), log=lambda m: None,
                    engine=SparkEngine(spark, SparkConfig()))
    assert res.validated == 2 and res.failed == 2
    for name in ("environments.jsonl", "validated.jsonl", "failures.jsonl"):
        assert _rows(out, name) == _rows(local, name), name
    envs = {e["repo"]: e for e in read_jsonl(out / "environments.jsonl")}
    assert envs["tests/fanout"]["instances"] == ["tests__fanout-1", "tests__fanout-twin"]  # one image, two instances
    assert {f["instance_id"]: f["stage"] for f in read_jsonl(out / "failures.jsonl")} == {
        "tests__fanout-noapply-1": "patch", "tests__fanout-ghost-1": "repository"}
    # the executors' logs came back to the driver's OUT, and the rows name them there
    assert _files(out) == _files(local)
    for rec in read_jsonl(out / "validated.jsonl"):
        assert all(Path(p).is_file() and str(p).startswith(str(out)) for p in rec["logs"]["before"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["languages"]["python"]["validated"] == 2


def test_evaluate_gold_on_spark_executors_equals_the_local_pool(batch, spark):
    from core.spark import SparkConfig
    from core.spark_engine import SparkEngine
    from swe_envs.config import SweEnvsConfig
    from swe_envs.envs.evaluate import evaluate

    validated = batch / "local" / "validated.jsonl"
    local = evaluate(validated, "gold", batch / "e-local", SweEnvsConfig(), log=lambda m: None)
    assert local["resolved_ids"] == ["tests__fanout-1", "tests__fanout-twin"]
    on_spark = evaluate(validated, "gold", batch / "e-spark", SweEnvsConfig(), batch / "repos", log=lambda m: None,
                        engine=SparkEngine(spark, SparkConfig()))
    assert on_spark == local
    assert _rows(batch / "e-spark", "results.jsonl") == _rows(batch / "e-local", "results.jsonl")
    assert _files(batch / "e-spark") == _files(batch / "e-local")  # instances/<id>/{report.json, patch.diff, ...}
