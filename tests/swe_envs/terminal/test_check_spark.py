"""``terminal check --master local[2]``: real EvoEval seeds (old Terminal-Bench layout, upstream images
substituted) checked on Spark executors give the local pool's rows, details and trial files; a resumed
Spark run checks only the tasks without a row."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.swe_envs.terminal.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.spark]

SEEDS = ("evoeval/75", "evoeval/76")


def _rows(out: Path, name: str) -> list[str]:
    rows = [json.loads(line) for line in (out / name).read_text().splitlines() if line.strip()]
    for r in rows:
        r.pop("timings", None)
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def checked(tb_seeds, tmp_path_factory):
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.terminal.check import check_tasks
    from swe_envs.terminal.config import TerminalConfig

    ensure_docker(log=lambda m: None)
    root = tmp_path_factory.mktemp("check_spark")
    for seed in SEEDS:
        shutil.copytree(tb_seeds / seed, root / "tasks" / seed)
    local = check_tasks(root / "tasks", root / "local", TerminalConfig(), workers=2, log=lambda m: None)
    assert local["ok"] == len(SEEDS), (root / "local" / "results.jsonl").read_text()
    proc = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(root / "tasks"),
                           "--output", str(root / "spark"), "--master", "local[2]"],
                          capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, proc.stdout


def test_spark_check_equals_the_local_pool(checked):
    root, stdout = checked
    local, spark = root / "local", root / "spark"
    assert _rows(spark, "results.jsonl") == _rows(local, "results.jsonl")
    assert _rows(spark, "details.jsonl") == _rows(local, "details.jsonl")  # same substitutes: cached by content
    # converted tasks and every trial's result, trajectory and verifier output came back to OUT
    assert _files(spark) == _files(local)
    trial = json.loads((spark / "trials" / "evoeval__75__oracle" / "result.json").read_text())
    assert trial["reward"] == 1.0 and trial["task_path"] == str(spark / "converted" / "evoeval" / "75")
    assert f"ok {len(SEEDS)}/{len(SEEDS)}" in stdout


def test_resumed_spark_check_runs_only_the_missing_tasks(checked, spark):
    from core.spark import SparkConfig
    from core.spark_engine import SparkEngine
    from swe_envs.terminal.check import check_tasks
    from swe_envs.terminal.config import TerminalConfig

    root, _ = checked
    out = root / "resumed"
    shutil.copytree(root / "spark", out)
    rows = (out / "results.jsonl").read_text().splitlines()
    kept = [r for r in rows if json.loads(r)["task"] != "evoeval/76"]
    (out / "results.jsonl").write_text("".join(r + "\n" for r in kept))
    lines: list[str] = []
    summary = check_tasks(root / "tasks", out, TerminalConfig(), log=lines.append, resume=True,
                          engine=SparkEngine(spark, SparkConfig()))
    assert summary["ok"] == len(SEEDS)
    assert [ln for ln in lines if ln.startswith("[")] == ["[2/2] ok  evoeval/76 "]
    assert _rows(out, "results.jsonl") == _rows(root / "local", "results.jsonl")
