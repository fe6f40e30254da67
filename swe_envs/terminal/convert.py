"""Old Terminal-Bench task layout -> Harbor task.

Old layout: ``task.yaml`` (instruction, difficulty, category, tags, parser_name,
max_agent_timeout_sec, max_test_timeout_sec, ...), ``Dockerfile`` and build context files,
``docker-compose.yaml`` (service ``client``, ``T_BENCH_*`` variables), ``solution.sh``,
``run-tests.sh``, ``tests/``. Mapping:

- instruction -> ``instruction.md``; timeouts -> ``[agent]``/``[verifier] timeout_sec``; every other
  task.yaml key -> ``[metadata]`` (kept, nothing dropped).
- the build context (everything that is not task metadata, solution or tests) -> ``environment/``.
  A compose file with only the boilerplate ``client`` service is dropped (its CPU limit and
  environment go to ``[environment]``); one with more services is kept with the client renamed
  ``main`` and the ``T_BENCH_*`` variables resolved to Harbor's container paths.
- ``solution.sh`` -> ``solution/solve.sh``; ``tests/`` + ``run-tests.sh`` -> ``tests/``, plus a
  ``tests/test.sh`` that runs ``run-tests.sh`` and turns its output into a reward the way
  Terminal-Bench's parser does (pytest's short summary: at least one PASSED and no FAILED/ERROR).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core.config import format_validation_error
from core.records import find_lone_surrogate
from swe_envs.terminal.task import TaskConfig, TaskFormatError, load_task

SUPPORTED_PARSERS = ("pytest",)
META_FILES = {"task.yaml", "solution.sh", "run-tests.sh", "docker-compose.yaml", "docker-compose.yml"}

# the T_BENCH_* variables of Terminal-Bench compose files, as Harbor's container layout
T_BENCH_VARS = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs/verifier",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/logs/agent",
}

TEST_SH = """#!/bin/bash
# Converted from Terminal-Bench: run the task's run-tests.sh unchanged, then score its output as
# Terminal-Bench's "{parser}" parser does: reward 1 iff the short test summary lists at least one
# PASSED test and no FAILED or ERROR.
mkdir -p /logs/verifier
export TEST_DIR=/tests
bash /tests/run-tests.sh 2>&1 | tee /logs/verifier/run-tests.log
summary=$(sed -n '/short test summary info/,$p' /logs/verifier/run-tests.log)
passed=$(printf '%s\\n' "$summary" | grep -c '^PASSED')
failed=$(printf '%s\\n' "$summary" | grep -Ec '^(FAILED|ERROR)')
if [ "$passed" -gt 0 ] && [ "$failed" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def is_tb_task(path: Path) -> bool:
    return (path / "task.yaml").is_file() and not (path / "task.toml").is_file()


def _resolve(value: str) -> str:
    for k, v in T_BENCH_VARS.items():
        value = value.replace("${" + k + "}", v).replace("$" + k, v)
    return value


def _compose_plan(compose: dict[str, Any], source: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(compose to keep or None, [environment] keys taken from the client service)."""
    services = compose.get("services")
    if not isinstance(services, dict) or "client" not in services:
        raise TaskFormatError(f"{source}: no 'client' service")
    client = services["client"] or {}
    env: dict[str, str] = {}
    raw_env = client.get("environment") or {}
    items = raw_env.items() if isinstance(raw_env, dict) else (
        (e.split("=", 1) + [""])[:2] for e in raw_env if isinstance(e, str))
    for k, v in items:
        if k != "TEST_DIR":  # Harbor uploads tests to /tests and the runner sets TEST_DIR itself
            env[str(k)] = _resolve(str(v))
    extra: dict[str, Any] = {}
    if env:
        extra["env"] = env
    cpus = (((client.get("deploy") or {}).get("resources") or {}).get("limits") or {}).get("cpus")
    if cpus is not None:
        try:
            extra["cpus"] = float(cpus)
        except ValueError:
            raise TaskFormatError(f"{source}: services.client.deploy.resources.limits.cpus: "
                                  f"not a number: {cpus!r}") from None
    if len(services) == 1:
        return None, extra
    kept = {"services": {}}
    for name, svc in services.items():
        svc = dict(svc or {})
        for key in ("image", "container_name", "volumes"):  # Harbor names images and mounts logs itself
            if name == "client":
                svc.pop(key, None)
        svc = yaml.safe_load(_resolve(yaml.safe_dump(svc)))
        kept["services"]["main" if name == "client" else name] = svc
    for k, v in compose.items():
        if k != "services":
            kept[k] = v
    return kept, extra


def convert_task(src: str | Path, dest: str | Path, overwrite: bool = False) -> Path:
    """Convert one Terminal-Bench task dir into a Harbor task dir; returns ``dest``."""
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise TaskFormatError(f"task directory not found: {src}")
    ty = src / "task.yaml"
    if not ty.is_file():
        raise TaskFormatError(f"{src}: no task.yaml (not a Terminal-Bench task)")
    try:
        meta = yaml.safe_load(ty.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise TaskFormatError(f"{ty}: invalid YAML: {err}") from None
    if not isinstance(meta, dict):
        raise TaskFormatError(f"{ty}: top level must be a mapping")
    bad_char = find_lone_surrogate(meta)
    if bad_char:  # YAML's "\uD800" escape: a str no UTF-8 file (task.toml) can hold
        raise TaskFormatError(f"{ty}: {bad_char} is a lone surrogate")
    instruction = meta.pop("instruction", None)
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskFormatError(f"{ty}: instruction is missing or empty")
    parser = meta.get("parser_name", "pytest")
    if parser not in SUPPORTED_PARSERS:
        raise TaskFormatError(f"{ty}: parser_name {parser!r} is not supported (supported: {SUPPORTED_PARSERS})")
    for f in ("Dockerfile", "solution.sh", "run-tests.sh"):
        if not (src / f).is_file():
            raise TaskFormatError(f"{src}: {f} is missing")
    if dest.exists():
        if not overwrite:
            raise TaskFormatError(f"{dest} exists (pass --overwrite to replace it)")
        shutil.rmtree(dest)

    cfg: dict[str, Any] = {"version": "1.0", "metadata": {}, "verifier": {}, "agent": {}, "environment": {}}
    for key, timeout_key in (("agent", "max_agent_timeout_sec"), ("verifier", "max_test_timeout_sec")):
        if timeout_key in meta:
            cfg[key]["timeout_sec"] = meta.pop(timeout_key)
    cfg["metadata"] = {k: v for k, v in meta.items() if v is not None}
    cfg["metadata"]["converted_from"] = "terminal-bench"
    compose_keep = None
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        if (src / name).is_file():
            try:
                compose = yaml.safe_load((src / name).read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as err:
                raise TaskFormatError(f"{src / name}: invalid YAML: {err}") from None
            compose_keep, extra = _compose_plan(compose, src / name)
            cfg["environment"].update(extra)
    try:
        config = TaskConfig.model_validate(cfg)  # bad timeouts etc. fail here, naming the key
    except ValidationError as err:
        raise TaskFormatError(format_validation_error(err, str(ty)).replace("\n", "; ")) from None
    try:  # YAML holds values TOML cannot (nulls in lists, non-string keys)
        config.to_toml()
    except (TypeError, ValueError) as err:
        raise TaskFormatError(f"{ty}: not representable as task.toml: {err}") from None

    tmp = dest.with_name(dest.name + ".tmp-convert")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        env_dir = tmp / "environment"
        env_dir.mkdir(parents=True)
        for p in src.iterdir():
            if p.name in META_FILES or p.name == "tests":
                continue
            if p.is_dir():
                shutil.copytree(p, env_dir / p.name, symlinks=True)
            else:
                shutil.copy2(p, env_dir / p.name)
        if compose_keep is not None:
            (env_dir / "docker-compose.yaml").write_text(yaml.safe_dump(compose_keep, sort_keys=False))
        (tmp / "solution").mkdir()
        shutil.copy2(src / "solution.sh", tmp / "solution" / "solve.sh")
        if (src / "tests").is_dir():
            shutil.copytree(src / "tests", tmp / "tests", symlinks=True)
        else:
            (tmp / "tests").mkdir()
        shutil.copy2(src / "run-tests.sh", tmp / "tests" / "run-tests.sh")
        (tmp / "tests" / "test.sh").write_text(TEST_SH.format(parser=parser), encoding="utf-8")
        for sh in (tmp / "tests" / "test.sh", tmp / "solution" / "solve.sh"):
            sh.chmod(0o755)
        (tmp / "task.toml").write_text(config.to_toml(), encoding="utf-8")
        (tmp / "instruction.md").write_text(instruction.rstrip("\n") + "\n", encoding="utf-8")
        load_task(tmp)  # what we wrote must load
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def convert_tree(src: Path, dest: Path, overwrite: bool = False) -> tuple[list[Path], list[tuple[str, str]]]:
    """Convert every Terminal-Bench task under ``src`` (the dir itself or its children)."""
    tasks = [src] if is_tb_task(src) else sorted(p.parent for p in src.rglob("task.yaml") if is_tb_task(p.parent))
    done, failed = [], []
    for t in tasks:
        rel = t.relative_to(src) if t != src else Path(t.name)
        target = dest if t == src else dest / rel
        try:
            done.append(convert_task(t, target, overwrite=overwrite))
        except (TaskFormatError, OSError) as err:
            failed.append((str(rel), str(err)))
    return done, failed
