"""The evaluation harness: apply predictions to built environments, run FAIL_TO_PASS ∪ PASS_TO_PASS.

Predictions are SWE-bench's format (``instance_id``, ``model_patch``, ``model_name_or_path``;
JSONL, a JSON list, or a JSON object keyed by instance id) or ``gold`` (each instance's own
``patch``). Each prediction runs once in its repo-version's environment (base commit + test
patch + model patch, no network unless the spec says so); ``resolved`` = every FAIL_TO_PASS
and every PASS_TO_PASS test passed. An empty, malformed or non-applying patch, a run past its
time limit, a missing environment: each is a counted outcome with its reason, never a crash.

Environments: an instance from ``validate``'s ``validated.jsonl`` names its image and test
command; otherwise the verified image of its repo-version is found (or built, with
``--repos``) exactly as ``validate`` does. Outputs: ``OUT/report.json`` (shaped like the
SWE-bench harness's run report, with ``resolved_ids``), ``OUT/results.jsonl`` (one line per
instance), ``OUT/instances/<id>/{report.json,patch.diff,test_output.txt}``. Repo-version groups
fan out over local threads or Spark executors (``engine.fan_out``), the driver writing the outputs.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import atomic_write_text, parsed_lines
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.parsers import PASSED, parse_log
from swe_envs.envs.parsers.test_ids import map_ids, scheme_for
from swe_envs.git import git
from swe_envs.instance import read_instances
from swe_envs.repos import find_repo

OUTPUTS = ("report.json", "results.jsonl", "instances")
_DIFF = re.compile(r"^(diff --git |--- \S|\+\+\+ \S)", re.M)
_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.M)


def read_predictions(spec: str, instances: dict[str, dict[str, Any]]) -> tuple[dict[str, dict], list[dict]]:
    """(predictions by instance id, problems); ``gold`` = each instance's own patch."""
    if spec == "gold":
        return {iid: {"instance_id": iid, "model_patch": inst.get("patch"), "model_name_or_path": "gold"}
                for iid, inst in instances.items()}, []
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"predictions file not found: {path} (or pass --predictions gold)")
    text = path.read_text(encoding="utf-8", errors="replace")
    rows: list[Any] = []
    problems: list[dict] = []
    try:  # a JSON list, an object keyed by id (SWE-bench accepts both) or one prediction ...
        data = json.loads(text)
        if isinstance(data, dict) and "instance_id" not in data:
            rows = list(data.values())
        else:  # a one-line JSONL file parses as one prediction object, not as a map of ids
            rows = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:  # ... else JSONL
        for n, row, err in parsed_lines(text.splitlines()):
            if err is None:
                rows.append(row)
            else:
                problems.append({"instance_id": f"{path.name}:{n}", "reason": f"malformed prediction line: {err}"})
    preds: dict[str, dict] = {}
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not row.get("instance_id"):
            problems.append({"instance_id": f"{path.name}:{n}", "reason": "prediction without an instance_id"})
        elif row["instance_id"] in preds:
            problems.append({"instance_id": row["instance_id"], "reason": "duplicate prediction"})
        else:
            preds[str(row["instance_id"])] = row
    return preds, problems


def patch_problem(patch: Any) -> tuple[str, str] | None:
    """(outcome, reason) for a patch that cannot be applied at all, else None."""
    if patch is None:
        return "empty_patch", "model_patch is null"
    if not isinstance(patch, str):
        return "error", f"model_patch is a {type(patch).__name__}, not a string"
    if not patch.strip():
        return "empty_patch", "model_patch is empty"
    if not _DIFF.search(patch) or not _HUNK.search(patch):
        return "error", "malformed patch: not a unified diff (no file headers or hunks)"
    return None


def test_lists(inst: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    out = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = inst.get(key, [])
        try:
            value = json.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError:
            return None
        if not isinstance(value, list):
            return None
        out.append([str(t) for t in value])
    return (out[0], out[1]) if out[0] else None


@dataclass
class Outcome:
    instance_id: str
    model: str
    outcome: str  # resolved | unresolved | empty_patch | error
    reason: str = ""
    tests_status: dict = field(default_factory=dict)
    applied: bool = False

    @property
    def resolved(self) -> bool:
        return self.outcome == "resolved"

    def swebench_report(self, patch: Any) -> dict:
        return {self.instance_id: {"patch_is_None": patch is None, "patch_exists": bool(patch),
                                   "patch_successfully_applied": self.applied, "resolved": self.resolved,
                                   "tests_status": self.tests_status}}


@dataclass
class RunPlan:
    """Image (+ base patches to the base commit), test command, network, log parser, id scheme, lists."""
    image: str
    base: list[tuple[str, str]]
    command: str
    network: str
    runner: str
    scheme: str
    f2p: list[str]
    p2p: list[str]


def grade(statuses: dict[str, str], f2p: list[str], p2p: list[str]) -> tuple[bool, dict]:
    """SWE-bench's tests_status: success/failure per list; a test missing from the log failed."""
    status = {}
    for key, tests in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        ok = [t for t in tests if statuses.get(t) == PASSED]
        status[key] = {"success": ok, "failure": [t for t in tests if statuses.get(t) != PASSED]}
    resolved = not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"]
    return resolved, status


class Evaluator:
    """Environments per repo-version (found or built once), then one sandboxed run per prediction."""

    def __init__(self, cfg: SweEnvsConfig, builder, repos_dir: Path | None, out: Path,
                 log: Callable[[str], None] = print):
        self.cfg, self.builder, self.repos_dir, self.out, self.log = cfg, builder, repos_dir, out, log
        self._envs: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def group_key(self, inst: dict[str, Any]) -> tuple[str, str]:
        """(repo, the commit its environment is built at), the way validate groups instances."""
        from swe_envs.envs.environment.group import environment_commit

        spec = inst.get("environment") if isinstance(inst.get("environment"), dict) else {}
        if spec.get("environment_setup_commit"):
            return inst["repo"], spec["environment_setup_commit"]
        path = self._clone(inst)
        return inst["repo"], (environment_commit(path, inst) if path else
                              inst.get("environment_setup_commit") or inst["base_commit"])

    def environment(self, inst: dict[str, Any], members: list[dict[str, Any]]) -> tuple[Any, Path | None]:
        """(environment, clone path); a failed environment carries its reason."""
        from swe_envs.envs.environment.builder import Environment
        from swe_envs.envs.environment.group import build_group

        key = self.group_key(inst)
        commit = key[1]
        spec = inst.get("environment") if isinstance(inst.get("environment"), dict) else {}
        path = self._clone(inst)
        with self._lock:
            if key in self._envs:
                return self._envs[key], path
            images = self.builder.images
            if spec.get("image") and images.image_id(spec["image"]):  # from validated.jsonl
                env = Environment(inst["repo"], spec.get("environment_setup_commit") or commit, spec.get("language"),
                                  True, image=spec["image"], image_id=images.image_id(spec["image"]),
                                  test_command=spec.get("test_command", ""), runner=spec.get("runner", "auto"),
                                  cached=True, network=spec.get("network") or self.cfg.sandbox.network,
                                  recipe=list(spec.get("recipe") or []))
            elif path is None:
                env = Environment(inst["repo"], commit, None, False,
                                  reason=f"no environment: repository {inst['repo']} not found (pass --repos "
                                  "DIR, or evaluate validate's validated.jsonl)")
            else:
                env = build_group(self.builder, self.cfg, inst["repo"], path, commit, members)
                self.log(f"environment {inst['repo']}@{commit[:12]}: "
                         f"{'cached' if env.cached else 'ok' if env.ok else 'FAILED'} in {env.seconds:.1f}s")
            self._envs[key] = env
            return env, path

    def _clone(self, inst: dict[str, Any]) -> Path | None:
        if self.repos_dir is None:
            return None
        try:
            path = find_repo(self.repos_dir, inst["repo"])
            git(path, "cat-file", "-e", f"{inst['base_commit']}^{{commit}}")
            return path
        except Exception:
            return None

    def plan(self, inst: dict[str, Any], members: list[dict[str, Any]]) -> RunPlan | Outcome:
        """How an instance's tests run, or the Outcome saying why they cannot (a session's verify
        runs the same plan in a warm container)."""
        from swe_envs.envs.validate.validator import InstanceFailure, Validator

        iid = inst["instance_id"]
        lists = test_lists(inst)
        if lists is None:
            return Outcome(iid, "", "error", "the instance has no FAIL_TO_PASS list: validate it first")
        env, path = self.environment(inst, members)
        if not env.ok:
            return Outcome(iid, "", "error", f"environment: {env.reason}")
        validator = Validator(self.builder.sandbox, 1, self.cfg.validation.select_touched_tests, None, cfg=self.cfg,
                              builder=self.builder)
        spec = inst.get("environment") if isinstance(inst.get("environment"), dict) else {}
        if spec.get("test_command") and spec.get("image") == env.image:
            command = spec["test_command"]
        elif path is not None:
            command = validator.command(inst, env, path)
        else:
            command = env.test_command
        built = spec.get("instance_image")
        if built and self.builder.images.image_id(built):  # validate's instance image
            image, base = built, []
        elif path is not None:
            try:
                image, base = validator.prepare(inst, env, path)
            except InstanceFailure as err:
                return Outcome(iid, "", "error", f"{err.stage}: {err.reason}")
        elif env.commit == inst["base_commit"]:
            image, base = env.image, []
        else:
            return Outcome(iid, "", "error", "the environment's commit differs from the base commit and "
                           "no clone to set it up (pass --repos DIR)")
        return RunPlan(image, base, command, validator.network(inst, env), env.runner,
                       scheme_for(inst["repo"], self.cfg.validation.id_schemes), *lists)

    def run(self, inst: dict[str, Any], pred: dict[str, Any], members: list[dict[str, Any]]) -> Outcome:
        iid, model = inst["instance_id"], str(pred.get("model_name_or_path") or "unknown")
        patch = pred.get("model_patch")
        bad = patch_problem(patch)
        if bad:
            return Outcome(iid, model, bad[0], bad[1])
        plan = self.plan(inst, members)
        if isinstance(plan, Outcome):
            plan.model = model
            return plan
        patches = [*plan.base, ("test", inst.get("test_patch") or ""), ("model", patch)]
        res = self.builder.sandbox.run(plan.image, plan.command, patches, runs=1, network=plan.network)
        folder = self.out / "instances" / iid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "patch.diff").write_text(patch, encoding="utf-8")
        if res.error:
            return Outcome(iid, model, "error", f"sandbox: {res.error}")
        if res.patch_failed:
            which = "model_patch" if "-model.diff" in res.patch_failed else "test_patch/base"
            return Outcome(iid, model, "error", f"{which} does not apply: {res.patch_failed[:300]}")
        if not res.runs or res.runs[0].timed_out:
            return Outcome(iid, model, "error", "the test run hit its time limit", applied=True)
        (folder / "test_output.txt").write_text(res.runs[0].log, encoding="utf-8")
        try:
            # graded in the ids of the instance's lists (the dataset's scheme for its repository)
            statuses = map_ids(plan.scheme, parse_log(plan.runner, res.runs[0].log))
        except Exception as err:
            return Outcome(iid, model, "error", f"log parser {plan.runner} failed: {type(err).__name__}: {err}",
                           applied=True)
        resolved, status = grade(statuses, plan.f2p, plan.p2p)
        failing = status["FAIL_TO_PASS"]["failure"] + status["PASS_TO_PASS"]["failure"]
        return Outcome(iid, model, "resolved" if resolved else "unresolved",
                       "" if resolved else f"{len(failing)} test(s) not passing, e.g. {failing[:3]}",
                       status, applied=True)


def make_report(instances: dict[str, dict], preds: dict[str, dict], outcomes: list[Outcome],
                problems: list[dict]) -> dict[str, Any]:
    """SWE-bench's run report (schema 2) plus per-instance reasons and the prediction problems."""
    by = {o.instance_id: o for o in outcomes}
    ids = lambda kind: sorted(i for i, o in by.items() if o.outcome == kind)  # noqa: E731
    submitted = sorted(i for i in preds if i in instances)
    completed = sorted(i for i, o in by.items() if o.outcome in ("resolved", "unresolved"))
    return {
        "total_instances": len(instances), "submitted_instances": len(submitted),
        "completed_instances": len(completed), "resolved_instances": len(ids("resolved")),
        "unresolved_instances": len(ids("unresolved")), "empty_patch_instances": len(ids("empty_patch")),
        "error_instances": len(ids("error")) + len(problems),
        "completed_ids": completed, "incomplete_ids": sorted(set(instances) - set(completed)),
        "empty_patch_ids": ids("empty_patch"), "submitted_ids": submitted, "resolved_ids": ids("resolved"),
        "unresolved_ids": ids("unresolved"), "error_ids": sorted(ids("error") + [p["instance_id"] for p in problems]),
        "reasons": {o.instance_id: o.reason for o in outcomes if o.reason} | {p["instance_id"]: p["reason"] for p in problems},
        "schema_version": 2,
    }


def evaluate(instances_path: Path, predictions: str, out: Path, cfg: SweEnvsConfig, repos_dir: Path | None = None,
             overwrite: bool = False, log: Callable[[str], None] = print, engine=None) -> dict[str, Any]:
    """``engine``: where the repo-version groups run (default: ``cfg.validation.workers`` local
    threads; a ``core.spark_engine.SparkEngine`` runs each group as one Spark task)."""
    from core.local_engine import LocalEngine, LocalEngineConfig
    from swe_envs.envs.validate.job import prepare_output

    if repos_dir is not None and not repos_dir.is_dir():
        raise InputError(f"repositories directory not found: {repos_dir}")
    engine = engine or LocalEngine(LocalEngineConfig(workers=cfg.validation.workers))
    repos_dir, out = (repos_dir.absolute() if repos_dir else None), out.absolute()
    good, bad = read_instances(instances_path)
    instances = {i["instance_id"]: i for i in good}
    preds, problems = read_predictions(predictions, instances)
    problems += [{"instance_id": b["instance_id"], "reason": f"instance: {b['reason']}"} for b in bad]
    problems += [{"instance_id": i, "reason": "prediction for an instance not in --instances"}
                 for i in preds if i not in instances]
    work = EvaluateWork(cfg, repos_dir)
    engine.connect(work)  # local: one clear message when no Docker engine answers, before OUT is touched
    prepare_output(out, overwrite, OUTPUTS)
    grouper = Evaluator(cfg, None, repos_dir, out, log)  # group keys only: no engine on the driver
    groups: dict[tuple[str, str], list[dict]] = {}
    keys = {inst["instance_id"]: grouper.group_key(inst) for inst in good}
    for inst in good:
        groups.setdefault(keys[inst["instance_id"]], []).append(inst)
    items = [{"members": members, "todo": [(i["instance_id"], preds[i["instance_id"]]) for i in members
                                           if i["instance_id"] in preds]} for members in groups.values()]
    items = [it for it in items if it["todo"]]
    outcomes: list[Outcome] = []

    def on_event(kind: str, value: Any) -> None:
        if kind == "log":
            log(value)
            return
        outcomes.append(Outcome(value["instance_id"], value["model_name_or_path"], value["outcome"],
                                value["reason"], value["tests_status"]))
        with open(out / "results.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(value, sort_keys=True) + "\n")

    (out / "results.jsonl").write_text("", encoding="utf-8")
    engine.fan_out(work, items, out, on_event)
    report = make_report(instances, preds, outcomes, problems)
    atomic_write_text(out / "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def _result_row(o: Outcome) -> dict[str, Any]:
    return {"instance_id": o.instance_id, "model_name_or_path": o.model, "resolved": o.resolved,
            "outcome": o.outcome, "reason": o.reason, "tests_status": o.tests_status}


class EvaluateWork:
    """One repo-version group per item: its environment found or built once, then each of its
    predictions run (``validation.workers`` at once)."""

    def __init__(self, cfg: SweEnvsConfig, repos_dir: Path | None):
        self.cfg, self.repos_dir = cfg, repos_dir

    def connect(self):
        from swe_envs.docker_setup import docker_client

        return docker_client()

    def start(self, client, workdir: Path, emit):
        from types import SimpleNamespace

        from swe_envs.envs.environment.group import make_builder
        from swe_envs.sandbox import sweep_orphans

        sweep_orphans(client)  # test runs of a killed evaluation would run on beside this one
        log = lambda m: emit("log", m)  # noqa: E731
        builder = make_builder(client, self.cfg, workdir, log)
        return SimpleNamespace(builder=builder, out=workdir,
                               evaluator=Evaluator(self.cfg, builder, self.repos_dir, workdir, log),
                               runs=ThreadPoolExecutor(max_workers=self.cfg.validation.workers))

    def stop(self, st) -> None:
        st.builder.sandbox.close()
        st.runs.shutdown(wait=True, cancel_futures=True)

    def run(self, st, item: dict[str, Any], emit) -> None:
        members = item["members"]
        by_id = {m["instance_id"]: m for m in members}
        for job in [st.runs.submit(self._one, st, by_id[iid], pred, members, emit) for iid, pred in item["todo"]]:
            job.result()

    def _one(self, st, inst: dict, pred: dict, members: list[dict], emit) -> None:
        try:
            o = st.evaluator.run(inst, pred, members)
        except Exception as err:  # one broken instance never takes the run down
            o = Outcome(inst["instance_id"], str(pred.get("model_name_or_path") or ""), "error",
                        f"internal: {type(err).__name__}: {err}")
        folder = st.out / "instances" / o.instance_id
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "report.json", json.dumps(o.swebench_report(pred.get("model_patch")), indent=2))
        emit("result", _result_row(o))
        emit("log", f"  {o.instance_id}: {o.outcome}" + (f" ({o.reason[:160]})" if o.reason else ""))

    def failed(self, item: dict[str, Any], reason: str) -> list[tuple[str, Any]]:
        """A group whose task died (e.g. no Docker engine on its executor): each prediction an error."""
        return [("result", _result_row(Outcome(iid, str(pred.get("model_name_or_path") or "unknown"), "error",
                                               reason))) for iid, pred in item["todo"]]
