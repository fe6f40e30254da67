"""The multi-task rollout orchestrator: groups of trajectories from task services and rollout servers.

Per group: a task is chosen by its ratio (the task furthest below its share) within its rate
limit; one of its services hands out an instance (``POST /task``: prompt messages, sampling); the
prompt is rendered once with the GLM-5 chat template; ``group_size`` trajectories are generated
token-in/token-out on the least-loaded rollout server and graded by the task's service
(``POST /reward``). A finished group waits in the buffer until the trainer takes it.

Failures are values: a connection error, timeout, HTTP error or garbled reply costs the trajectory
one attempt and it is resubmitted (to another server when there is one); after ``max_attempts``
it is dropped with ``failed:<stage>:<kind>``. An aborted generation (weights pushed with
``abort_inflight``) is resubmitted without charge. When the registry declares a server
unhealthy, trajectories waiting on it are resubmitted at once (a late answer from it is ignored).

Multi-turn: a model turn is followed by ``POST /step`` when it handed over to the environment
(``<|observation|>`` for chat tasks); a session task (``swe``, ``terminal``) answers with ``tool``
messages, rendered here into observation tokens (context, masked from the loss), and its episodes
stay on one task-service replica (``training.rl.rollout.sessions``).

The trainer's side of the HTTP API is ``training.rl.rollout.trainer_protocol``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

from core.errors import UserError
from training.policy.codec import Codec
from training.rl.rollout.config import OrchestratorConfig
from training.rl.rollout.external import ExternalGroups
from training.rl.rollout.faults import FaultInjector
from training.rl.rollout.groups import Group, Job, group_of
from training.rl.rollout.launch import rollout_command, task_command
from training.rl.rollout.ledger import Ledger
from training.rl.rollout.registry import Registry, Slot
from training.rl.rollout.sessions import SessionEpisodes
from training.rl.rollout.trainer_protocol import TrainerProtocol
from training.serving import rollout_client
from training.serving.http_json import CallFailure, HttpError, call, serve_json


class Orchestrator(TrainerProtocol, SessionEpisodes, ExternalGroups):
    def __init__(self, cfg: OrchestratorConfig, out_dir: str | Path, codec: Codec, mode: str = "async",
                 log=print, wait_for_trainer: bool = False):
        self.cfg, self.codec, self.mode, self.log = cfg, codec, mode, log
        self.out = Path(out_dir)
        self.ledger = Ledger(self.out, cfg.save_rollouts)
        self.registry = Registry(cfg.heartbeat, self.out / "logs", log, on_unhealthy=self._on_unhealthy)
        self.cond = threading.Condition()
        self.jobs: deque[Job] = deque()
        self.in_progress: dict[str, Group] = {}
        self.ready: deque[Group] = deque()
        self.delivered: dict[str, Group] = {}
        self.demand = 0  # sync mode: groups the trainer asked for and has not received
        self.weight_version, self.weights_path = 0, cfg.checkpoint
        self.counters: Counter = Counter()
        self.groups_by_task: Counter = Counter()
        self.next_start: dict[str, float] = {}
        # a resumed run's ledger already holds groups: numbering continues past them (a restart
        # at 0 issued "g000001-0" again, a LedgerError in every request after a SIGKILLed run)
        self.seq = 1 + max((int(i[1:].split("-")[0]) for i in self.ledger.issued), default=-1)
        self.stopping = threading.Event()
        # wait_for_trainer: generate nothing before the trainer's first /trainer_start, so rollouts
        # made while the trainer process starts are not free work outside its measured wall time
        self.trainer_seen = threading.Event()
        if not wait_for_trainer:
            self.trainer_seen.set()
        self.faults = FaultInjector(cfg.faults, self)
        self.server = None
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> str:
        self.server = serve_json(self.routes(), self.cfg.host, self.cfg.port)
        self.url = f"http://{self.cfg.host}:{self.server.server_address[1]}"
        self.registry.start()
        for i in range(self.cfg.rollout.replicas):
            self.registry.add_managed(f"rollout-{i}", "rollout", None, self.cfg.rollout.capacity,
                                      rollout_command(self, f"rollout-{i}"))
        for ep in self.cfg.rollout.endpoints:
            self.registry.register(None, "rollout", None, ep, self.cfg.rollout.capacity)
        for t in self.cfg.tasks:
            for i in range(t.replicas):
                key = f"task-{t.name}-{i}"
                self.registry.add_managed(key, "task", t.name, t.capacity, task_command(self, t, key))
            for ep in t.endpoints:
                self.registry.register(None, "task", t.name, ep, t.capacity)
        threads = [threading.Thread(target=self._creator, daemon=True, name="groups")]
        threads += [threading.Thread(target=self._worker, daemon=True, name=f"worker-{i}")
                    for i in range(self.cfg.workers)]
        for th in threads:
            th.start()
        self.faults.start()
        return self.url

    def wait_ready(self, timeout_s: float) -> bool:
        need: dict[tuple[str, str | None], int] = {}
        if self.cfg.rollout.replicas or self.cfg.rollout.endpoints:
            need[("rollout", None)] = 1
        for t in self.cfg.tasks:
            if t.replicas or t.endpoints:
                need[("task", t.name)] = 1
        return self.registry.wait_healthy(need, timeout_s)

    def shutdown(self, reason: str = "run_ended") -> dict[str, Any]:
        """Stop generating; every trajectory not yet final is dropped with ``reason``."""
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()
            groups = list(self.in_progress.values()) + list(self.ready) + list(self.delivered.values())
            for job in (j for g in self.in_progress.values() for j in g.jobs if j.stage not in ("done", "dropped")):
                self._close_episode(job)  # an episode still running: its session goes now
            self.in_progress.clear(), self.ready.clear(), self.delivered.clear(), self.jobs.clear()
        for g in groups:
            for job in g.jobs:
                self.ledger.close_open(job.id, reason, group=g.id)
        for tid in self.ledger.open_ids():  # issued but in no queue (a group still being built)
            self.ledger.close_open(tid, reason)
        self.faults.stop()
        self.registry.stop()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        summary = self.status()
        self.ledger.close()
        return summary

    # -- creating groups ---------------------------------------------------------------------------
    def _room(self) -> int:
        busy = len(self.in_progress) + len(self.ready)
        limit = self.cfg.max_ahead_groups if self.mode == "async" else self.demand
        return limit - busy

    def _pick_task(self):
        now = time.monotonic()
        eligible = [t for t in self.cfg.tasks if self.registry.healthy("task", t.name)
                    and self.next_start.get(t.name, 0.0) <= now]
        if not eligible:
            return None
        task = min(eligible, key=lambda t: (self.groups_by_task[t.name] / t.ratio, t.name))
        if task.rate_limit_per_s:
            self.next_start[task.name] = max(now, self.next_start.get(task.name, now)) + 1 / task.rate_limit_per_s
        return task

    def _creator(self) -> None:
        while not self.stopping.is_set():
            with self.cond:
                if self._room() <= 0 or not self.trainer_seen.is_set() or not self.registry.healthy("rollout"):
                    self.cond.wait(0.1)
                    continue
            task = self._pick_task()
            slot = self.registry.acquire("task", task.name) if task else None
            if slot is None:
                time.sleep(0.05)
                continue
            seed = self.cfg.seed * 1_000_003 + self.seq
            self.seq += 1
            res = call(f"{slot.endpoint}/task", {"seed": seed}, self.cfg.request_timeout_s)
            self.registry.release(slot)
            with self.cond:  # issue and enqueue atomically w.r.t. shutdown: no id is issued after its sweep
                if self.stopping.is_set():
                    return
                group = self._make_group(task.name, res)
                if group is None:
                    continue
                self.in_progress[group.id] = group
                self.jobs.extend(group.jobs)
                self.groups_by_task[task.name] += 1
                self.cond.notify_all()

    def _make_group(self, task: str, res: Any) -> Group | None:
        if isinstance(res, CallFailure):
            self.counters[f"task_fetch:{res.kind}"] += 1
            return None
        inst = res.get("instance") if isinstance(res, dict) else None
        if not isinstance(inst, dict) or not isinstance(inst.get("messages"), list):
            self.counters["task_fetch:garbled"] += 1
            return None
        try:
            group = group_of(f"g{self.seq:06d}", task, inst, self.codec, self.cfg, self.weight_version)
        except Exception as err:  # noqa: BLE001 - a bad instance is the service's fault: count it
            self.counters["task_fetch:bad_instance"] += 1
            self.log(f"[orchestrator] {task}: instance refused: {err}")
            return None
        gid = group.id
        for i in range(self.cfg.group_size):
            job = Job(group.new_trajectory(f"{gid}-{i}"), group)
            self.ledger.issue(job.id, task, gid)
            group.jobs.append(job)
        self.counters["groups_created"] += 1
        return group

    # -- trajectory jobs ---------------------------------------------------------------------------
    def _worker(self) -> None:
        while not self.stopping.is_set():
            with self.cond:
                if not self.jobs:
                    self.cond.wait(0.1)
                    continue
                job = self.jobs.popleft()
            if job.stage == "generate":
                self._generate(job)
            elif job.stage == "step":
                self._step(job)
            elif job.stage == "grade":
                self._grade(job)

    def _requeue(self, job: Job, front: bool = False, delay: float = 0.0) -> None:
        if delay:
            time.sleep(delay)
        with self.cond:
            if job.group.id in self.in_progress:
                (self.jobs.appendleft if front else self.jobs.append)(job)
                self.cond.notify_all()

    def _call_slot(self, job: Job, role: str, task: str | None) -> tuple[Slot | None, int]:
        tried = {job.slot} if job.slot else set()
        home = job.home if role == "task" else None  # an episode's session lives on one replica
        slot = self.registry.acquire(role, task, exclude=tried, only=home)
        with self.cond:
            job.slot = slot.key if slot else None
            return slot, job.epoch

    def _generate(self, job: Job) -> None:
        g, traj = job.group, job.traj
        slot, epoch = self._call_slot(job, "rollout", None)
        if slot is None:
            return self._requeue(job, delay=0.05)
        budget = dict(g.sampling, max_tokens=g.sampling["max_tokens"] - sum(map(len, traj.turns)))
        if budget["max_tokens"] <= 0:  # the episode used its whole token budget
            job.stage = "grade"
            return self._grade(job)
        # a server that does not tag its tokens (SGLang, vLLM) sampled with the weights it last
        # accepted, not with the latest version pushed: a failed push must not relabel its samples
        served = int(slot.info.get("weight_version", 0))
        res = rollout_client.generate(slot.endpoint, self.cfg.rollout.backend, traj.tokens,
                                      budget, f"{traj.id}.{traj.attempts}.{epoch}", self.cfg.request_timeout_s,
                                      served, self.cfg.rollout.model)
        self.registry.release(slot)
        if not self._current(job, epoch):
            return
        if isinstance(res, CallFailure):
            self._restart(job)
            return self._fail(job, res.kind)
        if res.finish_reason == "abort":
            self.counters["aborted_resubmitted"] += 1
            self._restart(job)
            return self._requeue(job, front=True)
        traj.add_turn(res.output_ids, res.logprobs, res.versions)
        traj.finish_reason = res.finish_reason
        traj.messages.append(self._assistant(g, res.output_ids))
        # a chat turn goes on only when it handed over to the tools (codec.hands_over); an answer ends it
        more = res.finish_reason == "stop" and len(traj.turns) < g.max_turns and (
            g.token_level or self.codec.hands_over(res.output_ids))
        job.stage = "step" if more else "grade"
        return self._step(job) if more else self._grade(job)

    def _assistant(self, g: Group, ids: list[int]) -> dict:
        if g.token_level:
            return {"role": "assistant", "content": self.codec.decode(ids, skip_special=False)}
        return self.codec.chat_reply(ids, thinking=self.cfg.thinking)

    def _step(self, job: Job) -> None:
        """Ask the task's environment for the observation after a model turn (multi-turn tasks)."""
        g, traj = job.group, job.traj
        slot, epoch = self._call_slot(job, "task", g.task)
        if slot is None:
            return self._requeue(job, delay=0.05)
        body = {"instance": g.instance, "turns": traj.turns}
        if g.session:  # the service runs the turn's tool calls in this episode's session, held there
            body.update(messages=traj.messages, episode=job.episode_key)
            job.home = slot.key
        res = call(f"{slot.endpoint}/step", body, self.cfg.request_timeout_s)
        self.registry.release(slot)
        if not self._current(job, epoch):
            return
        obs = res.get("observation", "missing") if isinstance(res, dict) else "missing"
        if isinstance(res, CallFailure) or not (obs is None or (isinstance(obs, list) and (
                all(isinstance(t, int) for t in obs) or (g.session and all(isinstance(m, dict) for m in obs))))):
            return self._fail(job, res.kind if isinstance(res, CallFailure) else "garbled")
        if obs:
            if isinstance(obs[0], dict):  # tool results: rendered here, with the template the prompt had
                try:
                    ids, msgs = self.codec.observation(obs, thinking=self.cfg.thinking)
                except UserError:
                    return self._fail(job, "bad_observation")
            else:
                ids, msgs = obs, [{"role": "tool", "content": self.codec.decode(obs, skip_special=False)}]
            traj.add_observation(ids)  # environment tokens: context, never trained
            traj.messages += msgs
            job.stage = "generate"
            return self._requeue(job, front=True)
        job.stage = "grade"
        self._grade(job)

    def _grade(self, job: Job) -> None:
        g, traj = job.group, job.traj
        slot, epoch = self._call_slot(job, "task", g.task)
        if slot is None:
            return self._requeue(job, delay=0.05)
        body = {"instance": g.instance, "messages": traj.messages, "turns": traj.turns}
        if g.session:
            body["episode"] = job.episode_key
        res = call(f"{slot.endpoint}/reward", body, self.cfg.request_timeout_s)
        self.registry.release(slot)
        if not self._current(job, epoch):
            return
        if isinstance(res, CallFailure):
            return self._fail(job, res.kind)
        reward = res.get("reward") if isinstance(res, dict) else None
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            return self._fail(job, "garbled")
        traj.reward, job.stage = float(reward), "done"
        traj.reward_info.update(res.get("info") or {})
        self._group_progress(g)

    def _current(self, job: Job, epoch: int) -> bool:
        with self.cond:
            if job.epoch != epoch or job.group.id not in self.in_progress:
                return False  # resubmitted meanwhile (its server went unhealthy) or run ended
            job.slot = None
            return True

    def _fail(self, job: Job, kind: str) -> None:
        job.traj.attempts += 1
        stage = job.stage
        self.counters[f"failed:{stage}:{kind}"] += 1
        # a session gone (410), or a step that failed half-way (its tool calls may have run: running
        # them again would act twice): the episode starts over in a fresh session
        if kind == "http_410" or (job.group.session and stage == "step"):
            self._restart(job)
        if job.traj.attempts < self.cfg.max_attempts:
            self.counters["resubmitted_after_failure"] += 1
            return self._requeue(job, delay=min(0.05 * 2**job.traj.attempts, 1.0))
        job.stage = "dropped"
        self._close_episode(job)
        self.ledger.close_open(job.id, f"failed:{stage}:{kind}", group=job.group.id, attempts=job.traj.attempts)
        self._group_progress(job.group)

    def _group_progress(self, g: Group) -> None:
        with self.cond:
            if g.id not in self.in_progress or any(j.stage not in ("done", "dropped") for j in g.jobs):
                return
            del self.in_progress[g.id]
            survivors = [j for j in g.jobs if j.stage == "done"]
            if len(survivors) >= self.cfg.min_group_size:
                g.jobs = survivors
                self.ledger.buffered(j.traj.payload() for j in survivors)  # OUT/rollouts.jsonl if saved
                self.ready.append(g)
                self.counters["groups_ready"] += 1
                self.cond.notify_all()
                return
        for j in survivors:
            j.stage = "dropped"
            self.ledger.close_open(j.id, "group_too_small", group=g.id)

    def _on_unhealthy(self, slot: Slot) -> None:
        with self.cond:
            hit = [j for g in self.in_progress.values() for j in g.jobs
                   if j.slot == slot.key or (j.home == slot.key and j.stage not in ("done", "dropped"))]
            for j in hit:
                j.epoch += 1
                j.slot = None
                if j.home == slot.key:  # its session died with the replica: start the episode over
                    j.reset()
                self.jobs.appendleft(j)
            self.counters["resubmitted_unhealthy"] += len(hit)
            self.cond.notify_all()

    # -- HTTP --------------------------------------------------------------------------------------
    def _register(self, body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body.get("endpoint"), str) or body.get("role") not in ("rollout", "task"):
            raise HttpError(400, "register needs endpoint (str) and role (rollout|task)")
        if body["role"] == "task" and body.get("name") not in {t.name for t in self.cfg.tasks}:
            raise HttpError(400, f"unknown task {body.get('name')!r}; configured: {[t.name for t in self.cfg.tasks]}")
        slot = self.registry.register(body.get("key"), body["role"], body.get("name"), body["endpoint"],
                                      int(body.get("capacity") or 1), body.get("info"))
        return {"ok": True, "key": slot.key, "heartbeat": self.cfg.heartbeat.model_dump()}

    def status(self) -> dict[str, Any]:
        with self.cond:
            queues = {"in_progress": len(self.in_progress), "ready": len(self.ready),
                      "delivered": len(self.delivered), "jobs": len(self.jobs)}
        return {"mode": self.mode, "weight_version": self.weight_version, "queues": queues,
                "counters": dict(sorted(self.counters.items())), "groups_by_task": dict(self.groups_by_task),
                "faults": self.faults.counts(), "ledger": self.ledger.summary(), "servers": self.registry.view(),
                "events": self.registry.events[-200:]}

    def routes(self) -> dict[str, Any]:
        def batch(b):
            return self.take_batch(int(b.get("groups", 1)), float(b.get("timeout_s", 30.0)))

        return {"GET /health": lambda b: {"status": "ok"}, "GET /status": lambda b: self.status(),
                "POST /register": self._register, "POST /batch": batch, "POST /commit": self.commit,
                "POST /trainer_start": self.trainer_start, "POST /weights": self.push_weights,
                "POST /trajectories": self.submit_group}
