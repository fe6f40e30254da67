"""``python -m swe_envs validate``: SWE-bench instances + local clones -> environments -> validated
instances (``validate_instances``).

Outputs under OUT (written as results arrive, so an interrupted batch keeps what it did):
``validated.jsonl`` (instances with FAIL_TO_PASS / PASS_TO_PASS, image, logs),
``failures.jsonl`` (instance_id, stage, reason), ``environments.jsonl`` (every environment
build with all its attempts), ``logs/`` and ``summary.json`` (per language: environment
build success rate per task, time per environment, validated counts, image bytes).
Every bad input (malformed line, missing repository or commit, a patch that does not
apply, a build that never succeeds, a hanging suite, a crashing parser) becomes one
failure record with its reason; the rest of the batch goes on.

Repo-version groups fan out (``engine.fan_out``) over local threads or Spark executors,
each with its own Docker engine; the driver writes every output either way.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from core.engine import Engine
from core.errors import InputError, UserError
from core.local_engine import LocalEngine, LocalEngineConfig
from swe_envs.config import SweEnvsConfig
from swe_envs.docker_setup import docker_client
from swe_envs.envs.environment.builder import Environment
from swe_envs.envs.environment.group import build_group, environment_commit, make_builder
from swe_envs.envs.validate.validator import InstanceFailure, Validator
from swe_envs.git import git
from swe_envs.instance import read_instances
from swe_envs.repos import check_patches, find_repo
from swe_envs.sandbox import sweep_orphans

OUTPUTS = ("validated.jsonl", "failures.jsonl", "environments.jsonl", "summary.json", "logs")


@dataclass
class BatchResult:
    out_dir: Path
    validated: int
    failed: int
    summary: dict[str, Any]


class _Writer:
    def __init__(self, out: Path):
        self.lock = threading.Lock()
        self.files = {name: open(out / name, "w", encoding="utf-8")
                      for name in ("validated.jsonl", "failures.jsonl", "environments.jsonl")}

    def write(self, name: str, record: dict[str, Any]) -> None:
        with self.lock:
            fh = self.files[name]
            fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            fh.flush()

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()


def prepare_output(out: Path, overwrite: bool, outputs: tuple[str, ...] = OUTPUTS) -> None:
    existing = [n for n in outputs if (out / n).exists()]
    if existing and not overwrite:
        raise UserError(f"{out} already holds outputs ({', '.join(existing)}); pass --overwrite to replace them")
    for n in existing:  # only our own outputs: OUT may be a shared directory
        target = out / n
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    out.mkdir(parents=True, exist_ok=True)


def validate_instances(instances_path: Path, repos_dir: Path, out: Path, cfg: SweEnvsConfig, overwrite: bool = False,
              log: Callable[[str], None] = print, engine: Engine | None = None) -> BatchResult:
    """``engine``: where the repo-version groups run (default: ``cfg.validation.workers`` local threads)."""
    if not repos_dir.is_dir():
        raise InputError(f"repositories directory not found: {repos_dir}")
    engine = engine or LocalEngine(LocalEngineConfig(workers=cfg.validation.workers))
    # executors share neither the driver's cwd nor its view of relative paths
    repos_dir, out = repos_dir.absolute(), out.absolute()
    instances, failures = read_instances(instances_path)
    work = ValidateWork(cfg, repos_dir)
    engine.connect(work)  # local: one clear message when no Docker engine answers, before OUT is touched
    prepare_output(out, overwrite)
    writer = _Writer(out)
    t0 = time.monotonic()
    stats: dict[str, Any] = {"instances": {}, "environments": []}

    def on_event(kind: str, value: Any) -> None:
        if kind == "log":
            log(value)
        elif kind == "instance":
            stats["instances"][value.pop("instance_id")] = value
        else:
            if kind == "environments.jsonl":
                stats["environments"].append(value)
            writer.write(kind, value)

    try:
        for f in failures:
            writer.write("failures.jsonl", f)
        groups = _group(instances, repos_dir, writer, stats)
        items = [{"repo": repo, "commit": commit, "members": members}
                 for (repo, commit), (_, members) in groups.items()]
        engine.fan_out(work, items, out, on_event)
    finally:
        writer.close()
    summary = summarize(stats, out, time.monotonic() - t0)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return BatchResult(out, summary["validated"], summary["failed"], summary)


class ValidateWork:
    """One repo-version group per item: build its image once, then run its instances side by
    side (``validation.workers`` at once, sharing one pool when groups run on one machine)."""

    def __init__(self, cfg: SweEnvsConfig, repos_dir: Path):
        self.cfg, self.repos_dir = cfg, repos_dir

    def connect(self):
        return docker_client()

    def start(self, client, workdir: Path, emit) -> SimpleNamespace:
        sweep_orphans(client)  # containers of a killed run on this engine
        cfg = self.cfg
        builder = make_builder(client, cfg, workdir, lambda m: emit("log", m))
        validator = Validator(builder.sandbox, cfg.validation.runs, cfg.validation.select_touched_tests,
                              workdir / "logs" / "instances" if cfg.validation.keep_logs else None,
                              cfg.validation.before_may_fail_to_build, cfg, builder)
        return SimpleNamespace(builder=builder, validator=validator,
                               runs=ThreadPoolExecutor(max_workers=cfg.validation.workers))

    def stop(self, st: SimpleNamespace) -> None:
        st.builder.sandbox.close()  # no container outlives the batch; running ones die first
        st.runs.shutdown(wait=True, cancel_futures=True)

    def run(self, st: SimpleNamespace, item: dict[str, Any], emit) -> None:
        repo, commit, members = item["repo"], item["commit"], item["members"]
        # found again where the task runs: a bundle is cloned into that machine's own cache
        path = find_repo(self.repos_dir, repo)
        try:
            env = build_group(st.builder, self.cfg, repo, path, commit, members)
        except Exception as err:  # one broken repo-version never takes the batch down
            env = Environment(repo, commit, None, False, reason=f"internal: {type(err).__name__}: {err}")
        emit("environments.jsonl", env.record() | {"instances": [m["instance_id"] for m in members]})
        state = "cached" if env.cached else ("ok" if env.ok else "FAILED")
        emit("log", f"environment {repo}@{commit[:12]} ({env.language}): {state} in {env.seconds:.1f}s"
             + (f" — {env.reason}" if not env.ok else ""))
        # a repo-version's instances start as soon as its image is verified
        for job in [st.runs.submit(self._instance, st, m, path, env, emit) for m in members]:
            job.result()

    def _instance(self, st: SimpleNamespace, inst: dict[str, Any], path: Path, env: Environment, emit) -> None:
        iid = inst["instance_id"]
        info = {"instance_id": iid, "language": env.language, "env_ok": env.ok}
        try:
            if not env.ok:
                # a suite that cannot run offline is the network's failure, not the recipe's
                raise InstanceFailure("network" if env.needs_network else "environment", env.reason)
            why = check_patches(path, inst["base_commit"], [("test_patch", inst["test_patch"]),
                                                            ("patch", inst["patch"])])
            if why:
                raise InstanceFailure("patch", why)
            record = st.validator.validate(inst, env, path)
            emit("validated.jsonl", record)
            info["validated"] = True
            emit("log", f"  {iid}: F2P {len(json.loads(record['FAIL_TO_PASS']))}, "
                 f"P2P {len(json.loads(record['PASS_TO_PASS']))}")
        except InstanceFailure as err:
            emit("failures.jsonl", {"instance_id": iid, "repo": inst.get("repo"), "stage": err.stage,
                                    "reason": err.reason, "language": env.language})
            emit("log", f"  {iid}: failed at {err.stage}: {err.reason}")
        except Exception as err:  # one broken instance never takes the batch down
            emit("failures.jsonl", {"instance_id": iid, "repo": inst.get("repo"), "stage": "internal",
                                    "reason": f"{type(err).__name__}: {err}", "language": env.language})
            emit("log", f"  {iid}: internal error: {type(err).__name__}: {err}")
        emit("instance", info)

    def failed(self, item: dict[str, Any], reason: str) -> list[tuple[str, Any]]:
        """A group whose task died (e.g. no Docker engine on its executor): its environment and
        every instance counted as failed with the reason."""
        members = item["members"]
        env = Environment(item["repo"], item["commit"], None, False, reason=reason)
        events: list[tuple[str, Any]] = [("environments.jsonl",
                                          env.record() | {"instances": [m["instance_id"] for m in members]})]
        for m in members:
            events += [("failures.jsonl", {"instance_id": m["instance_id"], "repo": m.get("repo"),
                                           "stage": "environment", "reason": reason, "language": None}),
                       ("instance", {"instance_id": m["instance_id"], "language": None, "env_ok": False})]
        return events + [("log", f"environment {item['repo']}@{item['commit'][:12]}: FAILED — {reason}")]


def _group(instances: list[dict[str, Any]], repos_dir: Path, writer: _Writer,
           stats: dict[str, Any]) -> dict[tuple[str, str], tuple[Path, list[dict[str, Any]]]]:
    """Instances by repo-version: (repo, environment_setup_commit or base_commit)."""
    groups: dict[tuple[str, str], tuple[Path, list[dict[str, Any]]]] = {}
    for inst in instances:
        iid = inst["instance_id"]
        try:
            path = find_repo(repos_dir, inst["repo"])
            git(path, "cat-file", "-e", f"{inst['base_commit']}^{{commit}}")
            commit = environment_commit(path, inst)
        except InputError as err:
            writer.write("failures.jsonl", {"instance_id": iid, "repo": inst["repo"], "stage": "repository",
                                            "reason": str(err)})
            stats["instances"][iid] = {"language": None, "env_ok": False}
            continue
        except Exception as err:
            writer.write("failures.jsonl", {"instance_id": iid, "repo": inst["repo"], "stage": "repository",
                                            "reason": f"commit not found: {str(err)[:200]}"})
            stats["instances"][iid] = {"language": None, "env_ok": False}
            continue
        groups.setdefault((inst["repo"], commit), (path, []))[1].append(inst)
    return groups


def summarize(stats: dict[str, Any], out: Path, seconds: float) -> dict[str, Any]:
    per_lang: dict[str, dict[str, Any]] = defaultdict(lambda: {"tasks": 0, "env_built_tasks": 0, "validated": 0,
                                                                "environments": 0, "environments_ok": 0,
                                                                "env_seconds": [], "image_bytes": 0,
                                                                "env_layer_bytes": 0})
    for env in stats["environments"]:
        d = per_lang[env["language"] or "unknown"]
        d["environments"] += 1
        d["environments_ok"] += bool(env["ok"])
        d["env_seconds"].append(env["seconds"])
        d["image_bytes"] += env["image_bytes"]
        d["env_layer_bytes"] += env["env_layer_bytes"]
    for info in stats["instances"].values():
        d = per_lang[info["language"] or "unknown"]
        d["tasks"] += 1
        d["env_built_tasks"] += bool(info["env_ok"])
        d["validated"] += bool(info.get("validated"))
    languages = {}
    for lang, d in sorted(per_lang.items()):
        secs = d.pop("env_seconds")
        languages[lang] = d | {
            "build_success_rate": round(d["env_built_tasks"] / d["tasks"], 4) if d["tasks"] else None,
            "seconds_per_environment": round(sum(secs) / len(secs), 2) if secs else None,
        }
    validated = sum(d["validated"] for d in languages.values())
    failed = sum(1 for _ in open(out / "failures.jsonl", encoding="utf-8"))
    return {"validated": validated, "failed": failed, "seconds": round(seconds, 2), "languages": languages,
            "goal_build_success_rate": 0.9}
