"""Environment sessions at work: reward latency, throughput, async RL on real episodes, the reaper.

- **Reward latency** (headline, goal: 5x): one SWE instance's reward for the same patch (its gold
  patch, written through the session's editor and bash tools) by a session's verify — a warm
  verifier container started when the session opened, the listed tests by node id through the pytest
  zygote (``swe_envs.sessions.verify``) — against the baseline, today's evaluate-per-reward path:
  ``python -m swe_envs evaluate`` as a subprocess on that patch, as the single-shot RL task services
  did. Rounds interleave ours and the baseline; medians per instance; the headline is the sum over
  the instances of those medians. Instances: samples' calc instance and the real SWE-bench Verified
  ``pallets__flask-5014`` (../shared/swe-real, when there). ``also``: the same verify with no warm
  container (started at verify time).
- **Throughput** (warm cache): the gold tool sequence episode (open, editor, bash, submit, verify,
  close) on the calc instance and the samples' Harbor task, ``--episodes`` of them on 2 threads;
  environment steps/s and sessions/hour, against the same episodes with sessions opened on demand
  and SWE rewards from the harness's sandbox run (``Evaluator.run``: the previous verify).
- **Async vs sync RL on real episodes** (``--rl``): configs/rl_agentic_tiny.yaml (multi-turn swe +
  terminal sessions, graded in real containers) trained ``--updates`` updates in each mode; trainer idle
  ratio and wall time. The random tiny model has never called a tool, so its episodes end after one turn:
  multi-turn length comes only with a policy that calls tools.
- **SIGKILL**: a swe session task service holding an episode's session (its warm verifier and a warm
  session beside it) is SIGKILLed: its containers are counted, then the next service's reaper's.

Run: ``python benchmarks/sessions.py [--rounds 3] [--episodes 6] [--rl --updates 3]`` (~15 min; +20 with --rl).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _report import OUT_DIR, ROOT, Result, write

sys.path.insert(0, str(ROOT))

from samples.agentic import build_agentic  # noqa: E402
from swe_envs.sandbox import LABEL  # noqa: E402
from swe_envs.sessions.pool import SessionPool  # noqa: E402
from swe_envs.sessions.run import gold_calls_swe, gold_calls_terminal, openers  # noqa: E402
from swe_envs.sessions.session import SweSession  # noqa: E402

WORK = OUT_DIR / "sessions"


def instances(real: Path) -> list[tuple[Path, Path]]:
    """(one-instance JSONL, repos dir) per instance measured."""
    paths = build_agentic(WORK / "agentic")
    out = [(paths["swe_instances"], paths["swe_repos"])]
    src = real / "swebench_verified_pytest_flask.jsonl"
    if src.is_file():
        row = next(r for r in map(json.loads, src.read_text().splitlines()) if r["instance_id"] == "pallets__flask-5014")
        one = WORK / "flask-5014.jsonl"
        one.write_text(json.dumps(row) + "\n")
        out.append((one, real))
    else:
        print(f"no real SWE-bench instances at {real} (--data): the calc instance only", flush=True)
    return out


def _gold(session) -> int:
    calls = gold_calls_swe(session.inst) if isinstance(session, SweSession) else gold_calls_terminal(session)
    for name, args in calls:
        session.step(name, args)
    session.step("submit", {})
    return len(calls) + 1


def _verifier_ready(session, timeout_s: float = 600.0) -> None:
    v, g = session.grader.verifiers, session.grader
    key = (g.image, g.plan.network, g.selected or g.plan.command)
    t0 = time.monotonic()
    while not v.ready.get(key) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.2)


def evaluate_subprocess(inst_file: Path, repos: Path, patch: str) -> tuple[float, bool]:
    iid = json.loads(inst_file.read_text().splitlines()[0])["instance_id"]
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        preds = Path(tmp) / "preds.jsonl"
        preds.write_text(json.dumps({"instance_id": iid, "model_patch": patch, "model_name_or_path": "bench"}) + "\n")
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "swe_envs", "evaluate", "--instances", str(inst_file), "--repos",
                               str(repos), "--predictions", str(preds), "--output", str(Path(tmp) / "out")],
                              cwd=ROOT, capture_output=True, text=True, timeout=3600)
        took = time.monotonic() - t0
        report = Path(tmp) / "out" / "report.json"
        resolved = proc.returncode == 0 and report.is_file() and iid in json.loads(report.read_text())["resolved_ids"]
    return took, resolved


def latency(rounds: int, real: Path) -> tuple[list[dict], list[dict]]:
    rows, cold = [], []
    for inst_file, repos in instances(real):
        iid = json.loads(inst_file.read_text().splitlines()[0])["instance_id"]
        opens, _ = openers(inst_file, repos, None, WORK / "out", None, log=lambda m: None)
        pool = SessionPool(opens, 2, log=lambda m: None)
        ours, base, verdicts = [], [], []
        try:
            for r in range(rounds + 1):  # round 0 warms what a warm cache holds (environment, warm image)
                session = pool.open(iid)
                _gold(session)
                _verifier_ready(session)
                patch = session.diff()
                t0 = time.monotonic()
                reward, verdict = session.verify()
                took = time.monotonic() - t0
                pool.close(session.id)
                _verifier_ready(session)  # the next verifier (primed as this one was taken) and its zygote
                time.sleep(15)            # settle first: they would take CPU from the baseline's run
                b, resolved = evaluate_subprocess(inst_file, repos, patch)
                print(f"{iid} round {r}: verify {took:.2f}s (reward {reward}), evaluate {b:.2f}s (resolved {resolved})",
                      flush=True)
                if r and reward == 1.0 and resolved:
                    ours.append(took)
                    base.append(b)
                    verdicts.append(verdict)
            session = pool.open(iid)  # no warm verifier: one started at verify time
            _gold(session)
            session.grader.verifiers.shutdown()
            session.grader.verifiers.closed = False  # the next take starts one on demand
            t0 = time.monotonic()
            reward, _ = session.verify()
            cold.append({"instance": iid, "verify_s": round(time.monotonic() - t0, 2), "reward": reward})
            pool.close(session.id)
        finally:
            pool.shutdown()
        # where a verify's time went (medians): the diff in the agent's container, the run in the
        # warm verifier (patches, tests, results back), pytest's own time for the tests inside that run
        parts = {"diff_s": [v.get("diff_s") for v in verdicts], "verify_run_s": [v.get("verify_run_s") for v in verdicts],
                 "pytest_s": [v.get("tests", {}).get("runner_s") for v in verdicts]}
        rows.append({"instance": iid, "ours": ours, "baseline": base, "ours_median": statistics.median(ours),
                     "baseline_median": statistics.median(base), "selected": verdicts[-1].get("selected"),
                     "parts": {k: statistics.median(xs) for k, xs in parts.items() if xs and None not in xs}})
    return rows, cold


class HarnessVerified(SweSession):
    """The previous verify: the diff graded by the evaluation harness in a fresh sandbox."""

    def verify(self):
        patch = self.diff()
        if not patch.strip():
            return 0.0, {"status": "empty_patch"}
        o = self.harness.evaluator.run(self.inst, {"model_patch": patch, "model_name_or_path": "s"}, [self.inst])
        return (1.0 if o.resolved else 0.0), {"status": o.outcome, "reason": o.reason}


def _harness_verified(host, make):
    session = make(host)
    session.__class__, session.harness = HarnessVerified, host.state("swe", lambda h: None)
    session.harness.verifiers.shutdown()  # no verifier primed for the baseline: it never uses one
    return session


def throughput(episodes: int, baseline: bool) -> dict:
    paths = build_agentic(WORK / "agentic")
    swe, _ = openers(paths["swe_instances"], paths["swe_repos"], None, WORK / "out", None, log=lambda m: None)
    term, _ = openers(None, None, paths["terminal"], WORK / "out", None, log=lambda m: None)
    if baseline:
        swe = {k: (lambda host, make=make: _harness_verified(host, make)) for k, make in swe.items()}
    names = [*swe, *term]
    pool = SessionPool({**swe, **term}, 3, warm=0 if baseline else 1, log=lambda m: None)
    for name in names:  # a warm cache: environments, images and each engine's harness exist before timing
        pool.close(pool.open(name).id)
    time.sleep(5)
    steps, rewards, lock = [], [], threading.Lock()
    todo = [names[i % len(names)] for i in range(episodes)]

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                name = todo.pop()
            s = pool.open(name)
            n = _gold(s)
            reward, _ = s.verify()
            pool.close(s.id)
            with lock:
                steps.append(n)
                rewards.append(reward)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    pool.shutdown()
    out = {"wall_s": round(wall, 1), "episodes": len(rewards), "steps": sum(steps), "rewards": rewards,
           "steps_per_s": sum(steps) / wall, "sessions_per_hour": len(rewards) * 3600 / wall, "warm_hits": pool.warm_hits}
    print(f"throughput ({'baseline' if baseline else 'ours'}): {out}", flush=True)
    return out


def rl(updates: int) -> dict:
    """configs/rl_agentic_tiny.yaml in both modes on this script's own copies of its inputs."""
    import yaml

    from core.cli import load_cli_config
    from training.rl.trainer.config import RLAsyncConfig
    from training.rl.trainer.run import run_training

    paths = build_agentic(WORK / "agentic")
    tasks = yaml.safe_load((ROOT / "configs/rl_agentic_tiny.yaml").read_text())["orchestrator"]["tasks"]
    for t in tasks:
        t["args"].update({"instances": str(paths["swe_instances"]), "repos": str(paths["swe_repos"])}
                         if t["kind"] == "swe" else {"tasks": str(paths["terminal"])})
    res = {}
    for mode in ("sync", "async"):
        cfg = load_cli_config(RLAsyncConfig, ROOT / "configs/rl_agentic_tiny.yaml", [
            f"trainer.mode={mode}", f"trainer.updates={updates}", f"orchestrator.tasks={json.dumps(tasks)}"])
        out = WORK / f"rl_{mode}"
        if out.exists():
            import shutil

            shutil.rmtree(out)
        summary = run_training(cfg, out, log=lambda m: None)
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        last = rows[-1]
        res[mode] = {"wall_s": last["wall_s"], "samples": last["trained_total"], "idle_ratio": last["idle_ratio"],
                     "reward": [r["reward"] for r in rows], "ledger_ok": summary["ledger"]["ok"],
                     "ledger": {k: v for k, v in summary["ledger"].items() if isinstance(v, int | bool)}}
        print(f"rl {mode}: {res[mode]}", flush=True)
    return res


def sigkill() -> dict:
    """A swe task service with an open episode (its container, the primed verifier, a warm session), SIGKILLed."""
    import docker

    from training.serving.http_json import CallFailure, call

    paths = build_agentic(WORK / "agentic")
    args = json.dumps({"instances": str(paths["swe_instances"]), "repos": str(paths["swe_repos"]), "warm": 1,
                       "out": str(WORK / "svc")})
    client = docker.from_env()

    def start() -> tuple[subprocess.Popen, str]:
        port = WORK / "svc.port"
        port.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "training.rl", "task-service", "--kind", "swe", "--name", "swe",
                                 "--args", args, "--port", "0", "--port-file", str(port)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not port.is_file() or not port.read_text():
            time.sleep(0.2)
        return proc, ready(f"http://127.0.0.1:{port.read_text()}")

    def ready(url: str) -> str:
        while isinstance(call(f"{url}/health", None), CallFailure):
            time.sleep(0.2)
        return url

    owned = lambda pid: len(client.containers.list(all=True, filters={"label": f"{LABEL}={socket.gethostname()}:{pid}"}))  # noqa: E731
    proc, url = start()
    task = call(f"{url}/task", {"seed": 0}, timeout_s=600)
    assert not isinstance(task, CallFailure), task
    inst = task["instance"]
    msg = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": "echo busy"})}}]}
    res = call(f"{url}/step", {"instance": inst, "turns": [[0]], "episode": "k.0", "messages": inst["messages"] + [msg]},
               timeout_s=900)
    assert not isinstance(res, CallFailure), res
    time.sleep(20)  # the verifier and the warm session start in the background
    left = owned(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    after_kill = owned(proc.pid)
    nxt, _ = start()
    after_reaper = owned(proc.pid)
    nxt.send_signal(signal.SIGTERM)
    nxt.wait(timeout=120)
    return {"held_before_kill": left, "left_after_sigkill": after_kill, "left_after_next_service": after_reaper}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--rl", action="store_true", help="also async vs sync RL on configs/rl_agentic_tiny.yaml")
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "swe-real",
                    help="the real SWE-bench instances and bundles (pallets__flask-5014 is measured when there)")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    lat, cold = latency(args.rounds, args.data)
    ours_tp, base_tp = throughput(args.episodes, False), throughput(args.episodes, True)
    killed = sigkill()
    print(f"SIGKILL: {killed}", flush=True)
    rl_res = rl(args.updates) if args.rl else None
    also = [Result(f"verify vs evaluate, {r['instance']}", r["ours_median"], r["baseline_median"], "s per reward",
                   goal=5.0, higher_is_better=False, ours_label="session verify (warm verifier)",
                   baseline_label="python -m swe_envs evaluate subprocess", extra={"rounds": r}) for r in lat]
    also += [Result(f"verify without a warm verifier, {c['instance']}", c["verify_s"],
                    next(r["baseline_median"] for r in lat if r["instance"] == c["instance"]), "s per reward",
                    higher_is_better=False, ours_label="session verify, verifier started at verify time",
                    baseline_label="python -m swe_envs evaluate subprocess") for c in cold]
    also += [Result("environment steps/s (gold episodes, 2 threads)", ours_tp["steps_per_s"], base_tp["steps_per_s"],
                    "tool calls / s", ours_label="warm sessions + warm verifiers",
                    baseline_label="sessions opened on demand, rewards by the harness's sandbox run",
                    extra={"runs": {"ours": ours_tp, "baseline": base_tp}}),
             Result("sessions/hour (gold episodes, 2 threads)", ours_tp["sessions_per_hour"],
                    base_tp["sessions_per_hour"], "sessions / hour", ours_label="warm sessions + warm verifiers",
                    baseline_label="sessions opened on demand, rewards by the harness's sandbox run")]
    if rl_res:
        a, s = rl_res["async"], rl_res["sync"]
        also += [Result("rl trainer busy ratio on multi-turn session episodes", 1 - a["idle_ratio"],
                        1 - s["idle_ratio"], "share of wall time", ours_label="async", baseline_label="sync",
                        extra={"runs": rl_res}),
                 Result("rl wall time per trained sample on session episodes", a["wall_s"] / a["samples"],
                        s["wall_s"] / s["samples"], "s / sample", higher_is_better=False, ours_label="async",
                        baseline_label="sync")]
    ours, base = sum(r["ours_median"] for r in lat), sum(r["baseline_median"] for r in lat)
    write(__file__, Result("reward latency: session verify vs evaluate per reward", ours, base,
                           "s per reward (sum of per-instance medians)", goal=5.0, higher_is_better=False,
                           ours_label="session verify: warm pristine container, listed tests, pytest zygote",
                           baseline_label="python -m swe_envs evaluate subprocess on the same patch",
                           extra={"sigkill": killed}),
          {"instances": [r["instance"] for r in lat], "rounds": args.rounds, "episodes": args.episodes,
           "rl_updates": args.updates if args.rl else None}, also)


if __name__ == "__main__":
    main()
