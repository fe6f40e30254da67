"""A SWE session's verify: its working tree's diff graded in a pristine container, fast.

The rules are the evaluation harness's (``Evaluator.plan``: the same image, base patches, test
command, network, log parser, id scheme and FAIL_TO_PASS ∪ PASS_TO_PASS; ``grade``: a listed test
missing from the log failed), run where they cost least:

- a warm container (``swe_envs.sessions.warm``): started from the verified image (plus its compiled
  bytecode) when the session opened, never touched by the agent; the patch is applied to its
  pristine tree, as SWE-bench applies it: the model patch, then the test patch; the model's changes
  to the files the test patch writes are dropped first (the tests are the test patch's, whatever the
  agent did to them);
- only the listed tests, by node id, where the runner takes ids back (pytest with the dataset's own
  ids); else, or when pytest does not find an id, the environment's own command;
- the fake-pass guards of validation (``check_run``: not timed out, not cut at the log cap, tests
  parsed, the runner's summary line seen and agreeing, the exit code agreeing) on every run graded
  resolved: a pass that fails one is no pass.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass
from typing import Any

from swe_envs.diff import parse_diff, patch_paths
from swe_envs.envs.evaluate import RunPlan, grade, patch_problem
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.parsers.test_ids import map_ids
from swe_envs.envs.validate.validator import check_run
from swe_envs.sessions.warm import Verifiers, WarmImages

# a pytest node id pytest takes back as given: a .py file, ``::`` names, an optional parameter
# without spaces, quotes, backslashes or colons (ids the dataset cut at a space, or ``[100%]`` noise,
# never match)
_NODE_ID = re.compile(r"[\w./-]+\.py(::\w+)+(\[[\w.,=+@%/-]*\])?")
_NOT_FOUND = re.compile(r"^ERROR: (not found|file or directory not found): ", re.M)
# pytest's closing line ("==== 60 passed in 0.12s ====", "... in 3.1 seconds" before 5.1): its own time
_PYTEST_TIME = re.compile(r"^=+ .* in ([\d.]+) ?s(?:econds)?\b", re.M)


@dataclass
class SweHost:
    """What SWE sessions on one Docker engine share: the harness (environments, plans), warm images
    and verifier containers."""
    evaluator: Any  # swe_envs.envs.evaluate.Evaluator on this engine's client
    warm: WarmImages
    verifiers: Verifiers

    def shutdown(self) -> None:
        self.verifiers.shutdown()


def selected_command(plan: RunPlan) -> str | None:
    """The plan's pytest command on the listed tests by node id, or None where that cannot be said
    exactly (another runner or id scheme, an id pytest would not take back, a listed test in a file
    the command does not run)."""
    ids = list(dict.fromkeys(plan.f2p + plan.p2p))
    if not plan.runner.startswith("pytest") or plan.scheme != "native" or not ids:
        return None
    if not all(_NODE_ID.fullmatch(t) for t in ids):
        return None
    try:
        tokens = shlex.split(plan.command)
    except ValueError:
        return None
    files: list[str] = []
    while tokens and tokens[-1].endswith(".py"):
        files.insert(0, tokens.pop())
    tail = " ".join(shlex.quote(f) for f in files)
    if not files or not plan.command.endswith(" " + tail) or not {t.split("::")[0] for t in ids} <= set(files):
        return None
    return plan.command[: -len(tail)] + " ".join(shlex.quote(t) for t in ids)


def model_part(patch: str, test_patch: str) -> tuple[str, list[str]]:
    """(the patch without the files the test patch writes, those files it had touched)."""
    tests = set(patch_paths(test_patch))
    kept, dropped = [], []
    for f in parse_diff(patch):
        (dropped if f.path in tests or (f.old_path or "") in tests else kept).append(f)
    return "".join(f.text for f in kept), [f.path for f in dropped]


class SweGrader:
    """One instance's verify on one engine: its plan, the warm image, the verifier pool."""

    def __init__(self, verifiers: Verifiers, inst: dict[str, Any], plan: RunPlan, image: str):
        self.verifiers, self.inst, self.plan, self.image = verifiers, inst, plan, image
        self.selected = selected_command(plan)

    def prime(self) -> None:
        self.verifiers.prime(self.image, self.plan.network, self.selected or self.plan.command)

    def grade(self, patch: str) -> tuple[float, dict[str, Any]]:
        t0 = time.monotonic()
        model, dropped = model_part(patch, self.inst.get("test_patch") or "")
        out: dict[str, Any] = {"dropped_test_files": dropped} if dropped else {}
        bad = patch_problem(model)
        if bad:
            return 0.0, {"status": bad[0], "reason": bad[1], **out}
        patches = [*self.plan.base, ("model", model), ("test", self.inst.get("test_patch") or "")]
        command = self.selected or self.plan.command
        res = self.verifiers.run(self.image, command, patches, self.plan.network)
        if self.selected and res.runs and res.runs[0].rc == 4 and _NOT_FOUND.search(res.runs[0].log):
            command = self.plan.command  # an id pytest did not take back: the whole command, once more
            res = self.verifiers.run(self.image, command, patches, self.plan.network)
        out.update(selected=command != self.plan.command, verify_run_s=round(res.seconds, 2))
        status, reason, extra = self._judge(res)
        out.update(extra)
        out.update(status=status, reason=reason, seconds=round(time.monotonic() - t0, 2))
        return (1.0 if status == "resolved" else 0.0), out

    def _judge(self, res) -> tuple[str, str, dict[str, Any]]:
        if res.error:
            return "error", f"sandbox: {res.error}", {}
        if res.patch_failed:
            which = "model_patch" if "-model.diff" in res.patch_failed else "test_patch/base"
            return "error", f"{which} does not apply: {res.patch_failed[:300]}", {}
        if not res.runs or res.runs[0].timed_out:
            return "error", "the test run hit its time limit", {}
        run = res.runs[0]
        try:
            parsed = parse_log(self.plan.runner, run.log)
            statuses = map_ids(self.plan.scheme, parsed)
        except Exception as err:
            return "error", f"log parser {self.plan.runner} failed: {type(err).__name__}: {err}", {}
        resolved, status = grade(statuses, self.plan.f2p, self.plan.p2p)
        failing = status["FAIL_TO_PASS"]["failure"] + status["PASS_TO_PASS"]["failure"]
        tests = {"tests": {"listed": len(self.plan.f2p) + len(self.plan.p2p), "not_passing": len(failing)}}
        took = _PYTEST_TIME.findall(run.log) if self.plan.runner.startswith("pytest") else []
        if took:  # how much of the verify was the tests' own run, as pytest timed it
            tests["tests"]["runner_s"] = float(took[-1])
        if not resolved:
            return "unresolved", f"{len(failing)} test(s) not passing, e.g. {failing[:3]}", tests
        why = check_run(run, parsed)
        if why:  # every listed test passed, in a run that cannot be trusted
            return "unresolved", f"fake-pass guard: {why}", tests
        return "resolved", "", tests
