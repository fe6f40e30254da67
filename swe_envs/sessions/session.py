"""Environment sessions: a SWE instance or a Harbor task opened as a container that tool calls run in.

One API for both (``open`` in the constructor, ``step``, ``verify``, ``close``):

- ``TerminalSession``: the task's image(s) built and started by the Harbor runner
  (``swe_envs.terminal.environment``: offline, limits, no host mounts, no-new-privileges, disk guard);
  ``verify`` runs the current step's ``tests/test.sh`` exactly as a trial does and reads the reward.
- ``SweSession``: a container from the instance's verified image (the repo-version environment, set up
  at the base commit), run as the image's non-root user with no network, every capability dropped,
  ``no-new-privileges``, CPU/memory/pids/disk limits and no host mount; ``verify`` takes the container's
  working-tree diff as the model patch and grades it by the evaluation harness's plan in a pristine
  warm container (``swe_envs.sessions.verify``: the instance's test patch, FAIL_TO_PASS ∪ PASS_TO_PASS).
"""

from __future__ import annotations

import shlex
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from swe_envs.sandbox import LABEL, container_options, owner
from swe_envs.sessions.tools import Observation, run_tool, write_file

SESSION_LABEL = "swe_envs.session"


def swe_instruction(inst: dict[str, Any]) -> str:
    """What an agent is told about a SWE instance (known before its container starts)."""
    return (f"The repository is checked out at /testbed. Resolve this issue:\n\n{inst['problem_statement']}\n\n"
            "Edit the source (not the tests), then call submit.")


class Session:
    kind = ""

    def __init__(self):
        self.id = uuid.uuid4().hex[:12]
        self.opened = self.last_used = time.monotonic()
        self.turns = 0
        self.submitted = False
        self.closed = False

    @property
    def instruction(self) -> str:
        raise NotImplementedError

    def exec(self, command: str, timeout_s: float) -> tuple[int, str, bool]:
        raise NotImplementedError

    def container(self):
        raise NotImplementedError

    def step(self, name: str, arguments: str | dict) -> Observation:
        self.last_used = time.monotonic()
        self.turns += 1
        obs = run_tool(self, name, arguments)
        self.submitted = self.submitted or obs.done
        return obs

    def verify(self) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class TerminalSession(Session):
    kind = "terminal"

    def __init__(self, ctx, task_dir: Path, out_dir: Path):
        from swe_envs.terminal.environment import Environment
        from swe_envs.terminal.task import load_task

        super().__init__()
        self.ctx, self.task, self.out_dir = ctx, load_task(task_dir), out_dir
        built = ctx.build(self.task)
        if not built.ok:
            raise RuntimeError(f"build: {built.error}")
        self.env = Environment(ctx.client, self.task, built, ctx.cfg.runner)
        self.step_index = 0

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def instruction(self) -> str:
        return self.task.steps[min(self.step_index, len(self.task.steps) - 1)].instruction

    def exec(self, command: str, timeout_s: float) -> tuple[int, str, bool]:
        res = self.env.exec(command, timeout_s=timeout_s)
        return res.rc, res.output, res.timed_out

    def container(self):
        return self.env.main

    def verify(self) -> tuple[float, dict[str, Any]]:
        """The current step's verifier; a multi-step task moves on to its next step."""
        from swe_envs.terminal.verifier import score_step

        step = self.task.steps[self.step_index]
        where = self.out_dir / self.id / step.name
        value, fields, why, how = score_step(self.ctx, self.env, step, self.task, where, where / "artifacts")
        self.step_index = min(self.step_index + 1, len(self.task.steps))
        return (value if value is not None else 0.0), {"step": step.name, "rewards": fields, "error": why or None,
                                                       "verifier": how["mode"]}

    @property
    def steps_left(self) -> int:
        return len(self.task.steps) - self.step_index

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.env.close()


class SweSession(Session):
    kind = "swe"

    def __init__(self, host, inst: dict[str, Any]):
        """``host``: a ``swe_envs.sessions.verify.SweHost`` (the harness, warm images and verifier
        containers of one Docker engine)."""
        import docker.errors

        from swe_envs.disk_guard import DiskGuard
        from swe_envs.envs.evaluate import Outcome
        from swe_envs.sessions.verify import SweGrader

        super().__init__()
        self.inst = inst
        plan = host.evaluator.plan(inst, [inst])
        if isinstance(plan, Outcome):
            raise RuntimeError(plan.reason)
        image = host.warm.get(plan.image)
        self.grader = SweGrader(host.verifiers, inst, plan, image)
        self.grader.prime()  # its verifier starts while the agent works
        cfg = host.evaluator.cfg.sandbox
        client = host.evaluator.builder.sandbox.client
        self._c = client.containers.run(
            image, ["sleep", "infinity"], detach=True, working_dir="/testbed", network_mode="none",
            labels={LABEL: owner(), SESSION_LABEL: self.id}, **container_options(cfg))
        self.disk = DiskGuard(client.api, cfg.disk_mb)
        self.disk.watch(self._c.id)
        self._docker_errors = docker.errors
        for name, text in plan.base:  # the base commit's diff, when there is no instance image
            write_file(self, f"/tmp/{name}.diff", text)
            rc, out, _ = self.exec(f"git apply --whitespace=nowarn /tmp/{name}.diff", 300)
            if rc != 0:
                self.close()
                raise RuntimeError(f"base patch did not apply: {out[-300:]}")
        # environment images may hold the tree without its history: a commit of the starting tree, so the
        # model patch is the working tree's diff against exactly what the session (and the grader) start from;
        # bytecode (the warm image's, the agent's test runs') is never part of it
        rc, out, _ = self.exec("git init -q && mkdir -p .git/info && printf '__pycache__/\\n*.py[co]\\n' >> "
                               ".git/info/exclude && git add -A && git -c user.name=session -c user.email=session@localhost "
                               "commit -q --allow-empty --no-verify -m session-start", 600)
        if rc != 0:
            self.close()
            raise RuntimeError(f"could not record the starting tree: {out[-300:]}")

    @property
    def name(self) -> str:
        return self.inst["instance_id"]

    @property
    def instruction(self) -> str:
        return swe_instruction(self.inst)

    def container(self):
        return self._c

    def exec(self, command: str, timeout_s: float) -> tuple[int, str, bool]:
        limit = max(1, int(timeout_s + 0.999))
        box: dict = {}

        def target():
            try:
                box["res"] = self._c.exec_run(["sh", "-c", f"timeout -k 5 {limit} bash -c {shlex.quote(command)}"],
                                              workdir="/testbed")
            except Exception as err:  # the container died or was removed under us
                box["err"] = err

        th = threading.Thread(target=target, daemon=True)
        th.start()
        th.join(timeout_s + 30)
        if th.is_alive():
            self.close()
            return 124, "host: command exceeded its limit; session closed", True
        if self.disk.exceeded:
            return -1, f"host: {self.disk.exceeded}", False
        if "err" in box:
            return -1, f"exec failed: {box['err']}", False
        res = box["res"]
        rc = int(res.exit_code if res.exit_code is not None else -1)
        return rc, (res.output or b"").decode("utf-8", "replace"), rc in (124, 137)

    def diff(self) -> str:
        """The working tree against the base commit, new files included: the model patch."""
        rc, out, _ = self.exec("git add -A >/dev/null 2>&1; git -c core.quotepath=off diff --cached --no-color "
                               "--binary HEAD", 300)
        return out if rc == 0 else ""

    def verify(self) -> tuple[float, dict[str, Any]]:
        """The diff graded in a pristine warm container (``swe_envs.sessions.verify``), never in this one."""
        t0 = time.monotonic()
        patch = self.diff()
        diff_s = round(time.monotonic() - t0, 3)
        if not patch.strip():
            return 0.0, {"status": "empty_patch", "reason": "the working tree has no change", "diff_s": diff_s}
        reward, verdict = self.grader.grade(patch)
        return reward, {**verdict, "diff_s": diff_s}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.disk.stop()
            try:
                self._c.remove(force=True)
            except self._docker_errors.DockerException:
                pass
