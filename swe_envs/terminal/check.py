"""``terminal check``: every task must build, its oracle must score 1 and doing nothing must score 0.

One row per task in ``OUT/results.jsonl`` — ``task``, ``built``, ``oracle_reward``, ``nop_reward``,
``ok``, ``reason`` — written as each task finishes (a long run shows progress and keeps what it
did). Old Terminal-Bench tasks are converted into ``OUT/converted/`` first. ``OUT/summary.json``
has the pass rates per group (collection and language), failure reasons, and which upstream
images were substituted; ``OUT/trials/`` holds every trial in Harbor's layout.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from core.io import atomic_write_text
from swe_envs.images import slug
from swe_envs.terminal.config import TerminalConfig
from swe_envs.terminal.convert import convert_task, is_tb_task
from swe_envs.terminal.discover import find_tasks
from swe_envs.terminal.needs import offline_capable, task_needs
from swe_envs.terminal.task import TaskFormatError, load_task


def _reward_text(r: dict) -> str:
    return f"{r['error']}" if r["error"] else f"reward {r['reward']}"


def check_row(name: str, oracle: dict | None, nop: dict | None, error: str = "", network: dict | None = None) -> dict:
    # network: what the task asked for and what it got (environment.network_decision), on every row
    row = {"task": name, "built": bool(oracle and oracle.get("built")),
           "oracle_reward": oracle["reward"] if oracle else None, "nop_reward": nop["reward"] if nop else None,
           "ok": False, "reason": error, "network": network or (oracle or {}).get("network"),
           # what the containers could do (isolation.isolation_decision): capabilities, user
           "isolation": (oracle or {}).get("isolation")}
    if error:
        return row
    if not row["built"]:
        row["reason"] = oracle["error"] or "build failed"
    elif oracle["reward"] is None:
        row["reason"] = f"oracle: {oracle['error']}"
    elif oracle["reward"] < 1:
        row["reason"] = f"oracle reward {oracle['reward']} (the reference solution does not pass)"
    elif nop is None or nop["reward"] is None:
        row["reason"] = f"nop: {nop['error'] if nop else 'not run'}"
    elif nop["reward"] > 0:
        row["reason"] = f"nop reward {nop['reward']} (the tests pass without any work)"
    else:
        row["ok"], row["reason"] = True, ""
    return row


def with_needs(row: dict, needs: list[dict]) -> dict:
    """A failed row names what the task fetches that is not provisioned here: the likely cause."""
    missing = [n["need"] for n in needs if not n["offline"]]
    if missing and not row["ok"]:
        row["reason"] += f" [not provisioned offline: {'; '.join(missing)}]"
    return row


def group_of(name: str) -> str:
    """'aider_polyglot/polyglot_go_x' -> 'aider_polyglot/go'; 'evoeval/3' -> 'evoeval'."""
    head, _, tail = name.rpartition("/")
    m = re.match(r"polyglot_([a-z+]+)_", tail)
    return f"{head}/{m.group(1)}" if m else (head or "tasks")


def check_tasks(tasks: Path, out: Path, cfg: TerminalConfig, workers: int = 1, limit: int = 0,
                log: Callable[[str], None] = print, resume: bool = False, engine=None) -> dict:
    """``engine``: where tasks run (default: ``workers`` local threads; a ``core.spark_engine.SparkEngine``
    checks each task as one Spark task, the task's files shipped with it)."""
    from core.local_engine import LocalEngine, LocalEngineConfig

    engine = engine or LocalEngine(LocalEngineConfig(workers=workers))
    tasks, out = tasks.absolute(), out.absolute()
    paths = find_tasks(tasks)
    if limit:
        paths = paths[:limit]
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done: dict[str, dict] = {}
    if resume and results_path.is_file():
        for line in results_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["task"]] = row
    else:
        results_path.unlink(missing_ok=True)
        (out / "details.jsonl").unlink(missing_ok=True)
    rows: list[dict] = list(done.values())
    details: dict[str, dict] = {}
    items = []
    for path in paths:
        name = path.relative_to(tasks).as_posix() if path != tasks else path.name
        if name not in done:
            items.append({"name": name, "path": str(path), "files": _task_files(path)})
    work = CheckWork(cfg)
    engine.connect(work)

    def on_event(kind: str, value) -> None:
        if kind == "log":
            log(value)
            return
        row, detail = value["row"], value["details"]
        rows.append(row)
        details[row["task"]] = detail
        with open(results_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        with open(out / "details.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(detail) + "\n")
        log(f"[{len(rows)}/{len(paths)}] {'ok ' if row['ok'] else 'BAD'} {row['task']} {row['reason'][:160]}")

    engine.fan_out(work, items, out, on_event)
    summary = summarize(rows, details)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1))
    return summary


def _task_files(path: Path) -> list[tuple[str, bytes, int]]:
    """A task travels with its item (a few KB): executors need not see the driver's task tree."""
    return [(p.relative_to(path).as_posix(), p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(path.rglob("*")) if p.is_file()]


def _unpack(files, dest: Path) -> Path:
    for rel, data, mode in files:
        f = dest / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
        f.chmod(mode)
    return dest


class CheckWork:
    """One task per item: convert if old-layout, build, run oracle then nop."""

    def __init__(self, cfg: TerminalConfig):
        self.cfg = cfg

    def connect(self):
        return None  # each Context opens its own client (with its long build timeout)

    def start(self, conn, workdir: Path, emit):
        import tempfile

        from swe_envs.terminal.trial import Context

        # task sources unpack outside workdir: only outputs travel back
        return {"ctx": Context(self.cfg, lambda m: emit("log", m)), "out": workdir,
                "src": Path(tempfile.mkdtemp(prefix="terminal-check-src-"))}

    def stop(self, st) -> None:
        import shutil

        shutil.rmtree(st["src"], ignore_errors=True)

    def run(self, st, item: dict, emit) -> None:
        from swe_envs.terminal.environment import network_decision
        from swe_envs.terminal.trial import TrialSpec, run_trial

        name, out = item["name"], st["out"]
        oracle = nop = network = None
        error = ""
        needs: list[dict] = []
        try:
            # the task tree where it is readable (this machine, a shared filesystem), else its shipped copy
            path = Path(item["path"])
            if not path.is_dir():
                path = _unpack(item["files"], st["src"] / name)
            if is_tb_task(path):
                dest = out / "converted" / name
                if not dest.exists():
                    convert_task(path, dest)
                task = load_task(dest)
            else:
                task = load_task(path)
            needs = task_needs(task)
            network = network_decision(task, self.cfg.runner)
            oracle = run_trial(st["ctx"], TrialSpec(task, "oracle", f"{slug(name)}__oracle"), out / "trials")
            if oracle["built"]:
                nop = run_trial(st["ctx"], TrialSpec(task, "nop", f"{slug(name)}__nop"), out / "trials")
        except (TaskFormatError, OSError) as err:
            error = f"task: {err}"
        except Exception as err:  # one broken task never stops the batch
            error = f"{type(err).__name__}: {str(err)[:300]}"
        row = with_needs(check_row(name, oracle, nop, error, network), needs)
        emit("row", {"row": row, "details": self._details(name, needs, oracle, nop)})

    @staticmethod
    def _details(name: str, needs: list[dict], oracle: dict | None, nop: dict | None) -> dict:
        return {"task": name, "needs": needs, "offline_capable": offline_capable(needs),
                "substitutions": (oracle or {}).get("substitutions", []),
                "timings": {"oracle": (oracle or {}).get("timings"), "nop": (nop or {}).get("timings")}}

    def failed(self, item: dict, reason: str) -> list:
        return [("row", {"row": check_row(item["name"], None, None, reason),
                         "details": self._details(item["name"], [], None, None)})]


def _reason_class(reason: str) -> str:
    r = re.sub(r"\d+(\.\d+)?", "N", reason)
    return r.split("(")[0].strip()[:90] or "ok"


def summarize(rows: list[dict], details: dict[str, dict] | None = None) -> dict:
    groups: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        g = groups[group_of(r["task"])]
        g["tasks"] += 1
        g["built"] += r["built"]
        g["oracle_pass"] += (r["oracle_reward"] or 0) >= 1
        g["ok"] += r["ok"]
    subs, needs = Counter(), Counter()
    for d in (details or {}).values():
        for s in d["substitutions"]:
            subs[f"{s['upstream']} -> {'itself' if s['real'] else s['local'] or 'FAILED'}"] += 1
        for n in d["needs"]:
            needs[n["need"] + ("" if n["offline"] else " [not provisioned]")] += 1
    capable = {k for k, d in (details or {}).items() if d["offline_capable"]}
    cap_rows = [r for r in rows if r["task"] in capable]
    return {"tasks": len(rows), "built": sum(r["built"] for r in rows),
            "offline_capable": len(cap_rows),
            "oracle_pass_offline_capable": sum((r["oracle_reward"] or 0) >= 1 for r in cap_rows),
            "needs": dict(needs.most_common()),
            "oracle_pass": sum((r["oracle_reward"] or 0) >= 1 for r in rows), "ok": sum(r["ok"] for r in rows),
            "groups": {k: dict(v) for k, v in sorted(groups.items())},
            "reasons": dict(Counter(_reason_class(r["reason"]) for r in rows if not r["ok"]).most_common()),
            # asked -> run per task: how many tasks that want the internet ran offline
            "network": dict(Counter(f"{n['asked']} -> {n['run']}" if (n := r.get("network")) else "unknown"
                                    for r in rows).most_common()),
            "substitutions": dict(subs)}
