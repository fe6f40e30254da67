"""One task instance: run the tests before and after the fix, derive FAIL_TO_PASS / PASS_TO_PASS.

Before = base commit + test patch; after = base commit + test patch + gold patch (SWE-bench).
Each phase runs in its own container, ``runs`` times. Guards against fake passes, per run:
the run must not have hit its time limit, must parse at least one test, must show the
runner's summary line (the suite ran to its end), must agree with the summary's totals where
the runner states them, and its exit code must agree with the parse (0 with failing tests,
or non-0 with none, is refused). A test whose status differs between runs of one phase is
flaky and excluded. F2P: passed in every after-run and not passed before (a skipped or
missing test is not a pass, before or after). P2P: passed in every run of both phases.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swe_envs.config import SweEnvsConfig
from swe_envs.diff import parse_diff, patch_paths
from swe_envs.envs import languages
from swe_envs.envs.environment import own_runners
from swe_envs.envs.environment.builder import Environment
from swe_envs.envs.environment.network_needs import network_needed
from swe_envs.envs.parsers import FAILED, PASSED, ParseResult, parse_log
from swe_envs.envs.parsers.test_ids import map_ids, scheme_for
from swe_envs.paths import is_test_path
from swe_envs.repos import Snapshot, diff
from swe_envs.sandbox import RunLog, Sandbox


class InstanceFailure(Exception):
    def __init__(self, stage: str, reason: str):
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason = stage, reason


def check_run(run: RunLog, parsed: ParseResult) -> str | None:
    """Why a run cannot be trusted, or None."""
    parsed = parsed.guard or parsed
    if run.timed_out:
        return f"test run hit its time limit and was killed (exit code {run.rc})"
    if run.output_limited:
        return f"test output reached the log limit and the run was stopped there (exit code {run.rc})"
    if not parsed.statuses:
        return f"no test parsed from the log (runner {parsed.runner}, exit code {run.rc})"
    if not parsed.summary_seen:
        return f"the {parsed.runner} summary line is missing: the suite did not run to its end"
    tally = parsed.tally()
    bad = tally[FAILED] + tally["error"]
    if parsed.counts is not None:
        want = parsed.counts
        got = (tally[PASSED], bad)
        # skips the summary names only by location (a module skipped at import has no test
        # line) may make up the difference; passes and failures must agree exactly
        skips_ok = tally["skipped"] <= want["skipped"] <= tally["skipped"] + parsed.located_skips
        if got != (want["passed"], want["failed"] + want["error"]) or not skips_ok:
            return f"parsed {tally} disagrees with the runner's summary {want}"
    if run.rc == 0 and bad:
        return f"exit code 0 but {bad} failing test(s) parsed"
    if run.rc != 0 and not bad:
        return f"exit code {run.rc} but no failing test parsed"
    return None


def touched_tests(test_patch: str) -> list[str]:
    """The test files a test patch writes (SWE-bench's test directives); one it deletes is no test
    to run (pytest stops at a missing path: MarkupSafe 1.0 moved ``markupsafe/tests.py`` to ``tests.py``)."""
    return [f.path for f in parse_diff(test_patch) if f.status != "deleted" and is_test_path(f.path)]


_COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (\S+) _+$", re.M)


def new_tests_uncollectable(runner: str, run: RunLog, parsed: ParseResult, inst: dict[str, Any]) -> bool:
    """A pytest before-run stopped at collection (exit code 2, nothing run) only by test files the
    test patch writes: the new tests import names only the fix adds (toolz 0.10.0's ``compose_left``).
    SWE-bench grades such a run as every test failing (a test missing from the log failed); the
    after-run, which must pass every guard, shows the environment itself works."""
    if not runner.startswith("pytest") or (parsed.guard or parsed).statuses or run.rc != 2 or run.timed_out:
        return False
    broken = set(_COLLECT_ERROR.findall(run.log))
    return bool(broken) and broken <= set(patch_paths(inst.get("test_patch") or ""))


@dataclass
class Classification:
    f2p: list[str]
    p2p: list[str]
    flaky: list[str]
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)


def _phase(runs: list[dict[str, str]]) -> tuple[dict[str, str], set[str]]:
    names = set().union(*runs) if runs else set()
    flaky = {t for t in names if len({r.get(t, "missing") for r in runs}) > 1}
    return {t: runs[0].get(t, "missing") for t in names if t not in flaky}, flaky


def classify(before_runs: list[dict[str, str]], after_runs: list[dict[str, str]]) -> Classification:
    before, flaky_b = _phase(before_runs)
    after, flaky_a = _phase(after_runs)
    flaky = flaky_b | flaky_a
    f2p = sorted(t for t, s in after.items() if s == PASSED and t not in flaky and before.get(t) != PASSED)
    p2p = sorted(t for t, s in after.items() if s == PASSED and t not in flaky and before.get(t) == PASSED)
    return Classification(f2p, p2p, sorted(flaky), before, after)


@dataclass
class PhaseResult:
    name: str
    runs: list[RunLog]
    parsed: list[ParseResult]
    seconds: float


def gold_comparison(inst: dict[str, Any], f2p: list[str], p2p: list[str]) -> dict[str, Any] | None:
    """How our lists compare with FAIL_TO_PASS / PASS_TO_PASS the input already carries (e.g. SWE-bench's)."""
    out: dict[str, Any] = {}
    for key, ours in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        gold = inst.get(key)
        try:
            gold = json.loads(gold) if isinstance(gold, str) else gold
        except json.JSONDecodeError:
            gold = None
        if not isinstance(gold, list) or (key == "FAIL_TO_PASS" and not gold):
            return None
        out[key] = {"match": sorted(gold) == sorted(ours), "missing": sorted(set(gold) - set(ours))[:50],
                    "extra": sorted(set(ours) - set(gold))[:50]}
    out["exact"] = all(v["match"] for v in out.values())
    return out


def misses_gold(gold: dict[str, Any]) -> bool:
    """A gold test we do not reproduce: FAIL_TO_PASS differs, or a PASS_TO_PASS test is not passing
    (an extra passing test is no failure to explain)."""
    return not gold["FAIL_TO_PASS"]["match"] or bool(gold["PASS_TO_PASS"]["missing"])


class Validator:
    def __init__(self, sandbox: Sandbox, runs: int, select_touched: bool, log_dir: Path | None,
                 before_may_fail_to_build: bool = False, cfg: SweEnvsConfig | None = None, builder=None):
        self.sandbox, self.runs, self.select_touched, self.log_dir = sandbox, runs, select_touched, log_dir
        self.before_may_fail_to_build = before_may_fail_to_build
        self.cfg = cfg or SweEnvsConfig()
        self.builder = builder  # EnvBuilder: instance images at the base commit (else a base diff)
        self._parser_checked: dict[tuple[str, str], str | None] = {}
        # per instance: the rules its instance layer needed beyond the environment's recipe
        self.instance_refine: dict[str, dict] = {}
        self._lock = threading.Lock()

    def network(self, inst: dict[str, Any], env: Environment) -> str:
        return self.cfg.validation.network.get(inst["instance_id"]) or env.network or "none"

    def prepare(self, inst: dict[str, Any], env: Environment, repo_path: Path) -> tuple[str, list[tuple[str, str]]]:
        """(image, patches that bring it to the base commit). As SWE-bench's instance images do, the
        repository is set up again at the base commit on top of the repo-version's image (its
        dependencies may differ; a diff may not apply byte-exactly); without a builder, a diff."""
        if inst["base_commit"] == env.commit:
            return env.image, []
        if self.builder is not None:
            image, error, refine = self.builder.instance_image(env, repo_path, inst["base_commit"],
                                                               inst["instance_id"])
            with self._lock:
                self.instance_refine[inst["instance_id"]] = refine
            if error:
                raise InstanceFailure("instance image", error)
            return image, []
        return env.image, [("base", diff(repo_path, env.commit, inst["base_commit"]))]

    def validate(self, inst: dict[str, Any], env: Environment, repo_path: Path) -> dict[str, Any]:
        t0 = time.monotonic()
        env_commit = env.commit
        image, base_patches = self.prepare(inst, env, repo_path)
        patches = [*base_patches, ("test", inst.get("test_patch") or ""), ("fix", inst.get("patch") or "")]
        command = self.command(inst, env, repo_path)
        network = self.network(inst, env)
        before = self._phase(inst, "before", env, command, patches[:-1], network, image)
        after = self._phase(inst, "after", env, command, patches, network, image)
        scheme = scheme_for(inst["repo"], self.cfg.validation.id_schemes)
        result = classify([map_ids(scheme, p) for p in before.parsed], [map_ids(scheme, p) for p in after.parsed])
        if not result.f2p:
            self._save_logs(inst["instance_id"], before, after)  # the evidence stays with the failure
            needs = network_needed([r.log for r in after.runs]) if network == "none" else None
            if needs:
                raise InstanceFailure("network", f"FAIL_TO_PASS needs network ({needs!r} in the after-run log); "
                                      f"set validation.network[{inst['instance_id']!r}] = bridge to run it with one")
            skips = skip_reasons([r.log for r in after.runs])
            raise InstanceFailure("validate", "no FAIL_TO_PASS test: the fix makes no test pass that failed before"
                                  + (f" ({len(result.flaky)} flaky excluded)" if result.flaky else "")
                                  + (f"; skipped after the fix: {skips}" if skips else ""))
        out = dict(inst)
        out["FAIL_TO_PASS"] = json.dumps(result.f2p)
        out["PASS_TO_PASS"] = json.dumps(result.p2p)
        out["image"], out["image_id"] = env.image, env.image_id  # one image per repo-version
        out["environment"] = {"image": env.image, "image_id": env.image_id, "language": env.language,
                              "runner": env.runner, "id_scheme": scheme, "test_command": command,
                              "network": network,
                              "environment_setup_commit": env_commit, "toolchain": env.toolchain,
                              "instance_image": image, "recipe": env.recipe,
                              "instance_refine": self.instance_refine.get(inst["instance_id"]),
                              "exclude_newer": env.exclude_newer, "profile": env.profile}
        out["validation"] = {"flaky": result.flaky, "runs_per_phase": self.runs,
                             "seconds": round(time.monotonic() - t0, 2),
                             "before": _tally(before), "after": _tally(after),
                             "exit_codes": {"before": [r.rc for r in before.runs], "after": [r.rc for r in after.runs]}}
        gold = gold_comparison(inst, result.f2p, result.p2p)
        if gold is not None:
            out["validation"]["gold"] = gold
            if network == "none" and misses_gold(gold):  # the after-run log may say why: no network
                out["validation"]["needs_network"] = network_needed([r.log for r in after.runs])
        out["logs"] = self._save_logs(inst["instance_id"], before, after)
        return out

    def command(self, inst: dict[str, Any], env: Environment, repo_path: Path) -> str:
        """The environment's test command; SWE-bench's test directives (touched test files) where safe."""
        if self.select_touched and not env.custom_command:
            touched = touched_tests(inst.get("test_patch") or "")
            if touched and env.own_runner:  # the repository's own runner, its own way of naming files
                return own_runners.plan(env.own_runner, Snapshot(repo_path, inst["base_commit"]), touched).command
            if touched:
                return languages.test_plan(env.language, Snapshot(repo_path, inst["base_commit"]), touched).command
        return env.test_command

    def _phase(self, inst: dict[str, Any], name: str, env: Environment, command: str,
               patches: list[tuple[str, str]], network: str = "none", image: str | None = None) -> PhaseResult:
        t0 = time.monotonic()
        image = image or env.image
        res = self.sandbox.run(image, command, patches, runs=self.runs, network=network)
        phase = PhaseResult(name, res.runs, [], time.monotonic() - t0)
        if res.error:
            raise InstanceFailure(name, res.error)
        if res.patch_failed:
            raise InstanceFailure(name, f"patch does not apply in the container: {res.patch_failed}")
        if res.killed and len(res.runs) < self.runs:
            phase.runs = res.runs
            self._save_logs(inst["instance_id"], phase)
            raise InstanceFailure(name, "the container hit its wall-clock limit and was killed")
        for i, run in enumerate(res.runs, 1):
            try:
                parsed = parse_log(env.runner, run.log)
            except Exception as err:  # a parser bug must cost one instance, not the batch
                raise InstanceFailure(name, f"log parser {env.runner} crashed: {type(err).__name__}: {err}") from None
            phase.parsed.append(parsed)
            if name == "before" and i == 1 and env.runner.startswith("file:"):
                self._check_llm_parser(inst, env, command, patches, run.log, parsed, network, image)
            why = check_run(run, parsed)
            if why and name == "before" and self.before_may_fail_to_build and not parsed.statuses and run.rc != 0:
                continue  # nothing compiled before the fix: every test counts as failing
            if why and name == "before" and new_tests_uncollectable(env.runner, run, parsed, inst):
                continue  # the new tests import what only the fix adds: every test counts as failing
            if why:
                self._save_logs(inst["instance_id"], phase)
                raise InstanceFailure(name, f"run {i}: {why}")
        return phase

    def _check_llm_parser(self, inst: dict[str, Any], env: Environment, command: str,
                          patches: list[tuple[str, str]], log: str, parsed: ParseResult, network: str,
                          image: str) -> None:
        """An LLM-written parser is trusted per environment only after it reproduced a known truth:
        the JUnit XML the run wrote, else the exit codes of single-test runs (the failing tests of
        the before-run among them)."""
        key = (env.image_id, env.runner)
        with self._lock:
            if key not in self._parser_checked:
                self._parser_checked[key] = self._parser_problem(inst, env, patches, log, parsed, network, image)
            why = self._parser_checked[key]
        if why:
            raise InstanceFailure("parser", why)

    def _parser_problem(self, inst, env, patches, log, parsed, network, image) -> str | None:
        from swe_envs.envs.parsers.llm import check_parser, pick_single_tests, truth_from_single_runs

        pcfg = self.cfg.llm_parser
        xml = parse_log("junit-xml", log)
        if xml.statuses:
            truth, source = xml.statuses, "the JUnit XML of the same run"
        else:
            template = self.cfg.validation.single_test_commands.get(inst["repo"])
            if not template:
                return (f"the LLM-written parser {env.runner} cannot be checked: the log has no JUnit XML and "
                        f"validation.single_test_commands[{inst['repo']!r}] is not set")
            ids = pick_single_tests(parsed.statuses, pcfg.max_single_tests)
            truth = truth_from_single_runs(self.sandbox, image, template, ids, pcfg.single_test_timeout_s,
                                           patches, network)
            source = f"exit codes of {len(truth)} single-test run(s)"
        code = Path(env.runner[5:]).read_text(encoding="utf-8")
        verdict = check_parser(code, [(log, truth)], pcfg)
        if not verdict.accepted:
            return f"the LLM-written parser {env.runner} disagrees with {source}: {'; '.join(verdict.reasons)[:500]}"
        return None

    def _save_logs(self, instance_id: str, *phases: PhaseResult) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for phase in phases:
            out[phase.name] = []
            if self.log_dir is None:
                continue
            for i, run in enumerate(phase.runs, 1):
                path = self.log_dir / instance_id / f"{phase.name}-{i}.log"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(run.log, encoding="utf-8")
                out[phase.name].append(str(path))
        return out


_SKIP_REASON = re.compile(r"^(?:SKIP|SKIPPED) \[(\d+)\] \S+?:\d+: (.+)$", re.M)


def skip_reasons(logs: list[str], top: int = 2) -> str:
    """The commonest skip reasons a run states (a missing system tool, say: sphinx's graphviz tests
    skip without ``dot``), so a failure says why the fix's tests never ran."""
    counts: dict[str, int] = {}
    for n, reason in _SKIP_REASON.findall(logs[0] if logs else ""):
        counts[reason.strip()[:120]] = counts.get(reason.strip()[:120], 0) + int(n)
    best = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    return "; ".join(f"{n} x {reason!r}" for reason, n in best)


def _tally(phase: PhaseResult) -> list[dict[str, int]]:
    return [p.tally() for p in phase.parsed]
