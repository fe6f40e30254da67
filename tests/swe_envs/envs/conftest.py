"""Fixtures for the environment tests: a real Docker engine (installed, started and seeded by
``ensure_docker`` when missing), tiny git repositories per language, batches run through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def docker_ready():
    """apt-get install docker.io debootstrap / start dockerd / build local/debian:bookworm, as needed."""
    from swe_envs.docker_setup import docker_client, ensure_docker

    ensure_docker(log=lambda m: print(f"[docker setup] {m}", file=sys.stderr))
    return docker_client()


def run_cli(*args: str, timeout: float = 1500, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swe_envs", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def write_jsonl(path: Path, records: list) -> Path:
    with open(path, "w") as fh:
        for r in records:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def lang_batch(docker_ready, tmp_path_factory):
    """The 9 language repos (plus a second task on the Python repo-version) through `validate`."""
    from samples.swe_envs.lang_repos import ALL, make_repo

    root = tmp_path_factory.mktemp("lang_repos")
    instances = [make_repo(root / "repos", spec) for spec in ALL.values()]
    twin = dict(instances[0], instance_id="tests__calc-python-2")  # same repo-version: same image
    path = write_jsonl(root / "instances.jsonl", instances + [twin])
    out = root / "out"
    proc = run_cli("validate", "--instances", str(path), "--repos", str(root / "repos"), "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"out": out, "stdout": proc.stdout, "validated": {r["instance_id"]: r for r in read_jsonl(out / "validated.jsonl")},
            "failures": read_jsonl(out / "failures.jsonl"), "environments": read_jsonl(out / "environments.jsonl"),
            "summary": json.loads((out / "summary.json").read_text()), "specs": ALL}
