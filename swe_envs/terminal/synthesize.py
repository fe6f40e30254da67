"""LLM task synthesis with a refine loop: from seed tasks, or grounded in documents (closed loop).

Each candidate (instruction, Dockerfile, solution, tests, as one JSON object from the proposer)
passes gates in order; the first failure, with its log, goes back to the refine prompt for up to
``rounds`` rounds:
  parse -> static (layout, nothing baked, test.sh writes a reward) -> build -> oracle reward 1
  -> nop reward 0 -> [documents: a stub agent that creates the files the instruction names scores 0]
  -> rubric judge (every criterion passes).
A refine reply identical to the previous candidate ends the lineage (``repeated_candidate``): a
looping model costs one round, not ``rounds``. Every attempt is a row in ``attempts.jsonl`` with
the gate it reached and why it stopped; accepted tasks are Harbor dirs in ``OUT/tasks/``;
``OUT/metrics.json`` has build %, oracle pass %, nop-fail %, rubric pass % (over attempts that
reached each gate), rounds per accepted task, and rejection counts by reason.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.io import atomic_write_text
from core.llm import LLMClient, LLMError
from swe_envs.images import slug
from swe_envs.terminal.config import SynthConfig
from swe_envs.terminal.rubric import judge, static_problems
from swe_envs.terminal.task import HarborTask, TaskFormatError, load_task, parse_task_toml, write_task

RULES = """Write a NEW terminal task in Harbor format as ONE JSON object with string fields:
"name", "instruction" (what to do, which files to write), "dockerfile" (must start FROM {base}; no network
at test time; never COPY tests/ or solution/), "solution_sh" (bash that solves the task), "test_sh" (bash
that checks the result and writes 1 or 0 to /logs/verifier/reward.txt), and optionally "test_files" (an
object of file name -> content, uploaded to /tests at test time). Reply with the JSON only."""

SEED_PROMPT = RULES + """

Here is an existing task for inspiration; make a different one of similar difficulty.
=== instruction ===
{instruction}
=== Dockerfile ===
{dockerfile}
=== solution ===
{solution}
=== tests ===
{tests}
"""

DOC_PROMPT = RULES + """

Ground the task in this documentation: the solution must use what the document describes, and
the tests must check behaviour that follows from it.
=== document: {title} ===
{text}
"""

REFINE_PROMPT = RULES + """

Your previous candidate failed at the "{stage}" gate: {reason}
Log (tail):
{log}
Previous candidate:
{candidate}
Fix it and reply with the whole corrected JSON object."""


@dataclass
class Attempt:
    lineage: str
    round: int
    stage: str  # the gate it failed at, or "accepted"
    reason: str = ""
    built: bool | None = None
    oracle_reward: float | None = None
    nop_reward: float | None = None
    stub_reward: float | None = None
    rubric_pass: bool | None = None
    task_dir: str | None = None


@dataclass
class SynthResult:
    attempts: list[Attempt] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)


def parse_candidate(text: str) -> dict:
    """The proposer's JSON object (bare, or in a ```json fence); ValueError names what is wrong."""
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    body = fence.group(1) if fence else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        data = json.loads(body[start:end + 1])
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON: {err.msg} at char {err.pos}") from None
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    for key in ("instruction", "dockerfile", "solution_sh", "test_sh"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ValueError(f"missing or empty string field {key!r}")
    tf = data.get("test_files") or {}
    if not isinstance(tf, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tf.items()):
        raise ValueError("test_files must be an object of file name -> text")
    if any(k.startswith("/") or ".." in Path(k).parts for k in tf):
        raise ValueError("test_files names must be relative paths inside tests/")
    return data


def write_candidate(data: dict, dest: Path) -> HarborTask:
    name = slug(str(data.get("name") or "task"))[:60] or "task"
    cfg = parse_task_toml(f'schema_version = "1.1"\n[task]\nname = "synth/{name}"\n[verifier]\ntimeout_sec = 300\n'
                          '[agent]\ntimeout_sec = 600\n[environment]\ncpus = 1\nmemory_mb = 1024\n'
                          '[metadata]\nsource = "synthesized"\n')
    files = {"environment/Dockerfile": data["dockerfile"], "solution/solve.sh": data["solution_sh"],
             "tests/test.sh": data["test_sh"]}
    files.update({f"tests/{k}": v for k, v in (data.get("test_files") or {}).items()})
    shutil.rmtree(dest, ignore_errors=True)
    write_task(dest, cfg, data["instruction"].rstrip() + "\n", files)
    return load_task(dest)


def seed_prompt(task: HarborTask, base: str, limit: int = 2500) -> str:
    def read(p: Path | None) -> str:
        return p.read_text(encoding="utf-8", errors="replace")[:limit] if p and p.is_file() else "(none)"

    step = task.steps[0]
    return SEED_PROMPT.format(base=base, instruction=task.instruction[:limit], dockerfile=read(task.dockerfile),
                              solution=read(step.solution_dir / "solve.sh" if step.solution_dir else None),
                              tests=read(step.tests_dir / "test.sh"))


class Synthesizer:
    def __init__(self, ctx, cfg: SynthConfig, out: Path, log: Callable[[str], None] = print, stub_check: bool = False):
        if cfg.llm is None:
            raise TaskFormatError("synthesis needs an LLM endpoint (synth.llm or --endpoint)")
        self.ctx, self.cfg, self.out, self.log = ctx, cfg, out, log
        self.proposer = LLMClient(cfg.llm)
        self.judge = LLMClient(cfg.judge_llm or cfg.llm)
        self.stub_check = stub_check
        self.result = SynthResult()

    def _ask(self, prompt: str) -> str:
        try:
            return self.proposer.chat([{"role": "user", "content": prompt}], max_tokens=self.cfg.max_tokens,
                                      temperature=self.cfg.temperature).text
        except LLMError as err:
            return f"<llm failure: {err}>"

    def _gates(self, task: HarborTask, lineage: str, rnd: int) -> tuple[Attempt, str]:
        from swe_envs.terminal.trial import TrialSpec, run_trial

        a = Attempt(lineage, rnd, "static", task_dir=str(task.path))
        problems = static_problems(task)
        if problems:
            a.reason = "; ".join(problems)
            return a, ""
        trials = self.out / "trials"
        name = f"{lineage}-r{rnd}"
        oracle = run_trial(self.ctx, TrialSpec(task, "oracle", f"{name}__oracle"), trials)
        a.built = oracle["built"]
        if not oracle["built"]:
            a.stage, a.reason = "build", oracle["error"] or "build failed"
            log = (trials / f"{name}__oracle" / "build.log")
            return a, log.read_text(encoding="utf-8")[-self.cfg.log_tail_chars:] if log.exists() else ""
        a.oracle_reward = oracle["reward"]
        vlog = trials / f"{name}__oracle" / "verifier" / "test-stdout.txt"
        tail = vlog.read_text(encoding="utf-8")[-self.cfg.log_tail_chars:] if vlog.exists() else ""
        if oracle["reward"] is None or oracle["reward"] < 1:
            a.stage = "oracle"
            a.reason = oracle["error"] or f"oracle reward {oracle['reward']} (the solution does not pass the tests)"
            return a, tail
        checks = [("nop", "nop")] + ([("stub", "stub")] if self.stub_check else [])
        for stage, agent in checks:
            r = run_trial(self.ctx, TrialSpec(task, agent, f"{name}__{agent}"), trials)
            setattr(a, f"{agent}_reward", r["reward"])
            if r["reward"] is None or r["reward"] > 0:
                a.stage = stage
                a.reason = r["error"] or (f"{agent} reward {r['reward']}: the tests pass without solving the task"
                                          if agent == "nop" else f"stub reward {r['reward']}: creating empty files "
                                          "named in the instruction passes the tests (trivially satisfiable)")
                return a, ""
        verdict = judge(task, self.judge)
        a.rubric_pass = verdict.passed
        if not verdict.passed:
            a.stage = "rubric"
            failed = [f"{k}: {v['reason']}" for k, v in verdict.criteria.items() if not v["pass"]]
            a.reason = verdict.error or "; ".join(failed)[:800]
            return a, ""
        a.stage = "accepted"
        return a, ""

    def lineage(self, lineage: str, first_prompt: str) -> bool:
        prompt, prev_hash = first_prompt, None
        for rnd in range(1, self.cfg.rounds + 1):
            reply = self._ask(prompt)
            h = hashlib.sha256(reply.strip().encode()).hexdigest()
            if h == prev_hash:
                self._record(Attempt(lineage, rnd, "repeated_candidate", "the refine reply repeats the failed candidate"))
                return False
            prev_hash = h
            try:
                data = parse_candidate(reply)
                task = write_candidate(data, self.out / "candidates" / f"{lineage}-r{rnd}")
            except (ValueError, TaskFormatError) as err:
                a = Attempt(lineage, rnd, "parse", str(err))
                self._record(a)
                prompt = REFINE_PROMPT.format(base=self.cfg.base_image, stage="parse", reason=a.reason, log="",
                                              candidate=reply[:4000])
                continue
            a, tail = self._gates(task, lineage, rnd)
            self._record(a)
            if a.stage == "accepted":
                dest = self.out / "tasks" / f"{lineage}-{slug(task.name.split('/')[-1])}"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(task.path, dest)
                self.result.accepted.append(str(dest))
                return True
            prompt = REFINE_PROMPT.format(base=self.cfg.base_image, stage=a.stage, reason=a.reason,
                                          log=tail or "(none)", candidate=json.dumps(data)[:6000])
        return False

    def _record(self, a: Attempt) -> None:
        self.result.attempts.append(a)
        with open(self.out / "attempts.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(a.__dict__) + "\n")
        self.log(f"{a.lineage} round {a.round}: {a.stage} {a.reason[:150]}")


def metrics(res: SynthResult, lineages: int) -> dict:
    at = res.attempts

    def rate(num: int, den: int) -> float | None:
        return round(num / den, 4) if den else None

    reached_build = [a for a in at if a.built is not None]
    reached_oracle = [a for a in at if a.oracle_reward is not None]
    passed_oracle = [a for a in reached_oracle if a.oracle_reward >= 1]
    reached_nop = [a for a in passed_oracle if a.nop_reward is not None]
    reached_rubric = [a for a in at if a.rubric_pass is not None]
    accepted = [a for a in at if a.stage == "accepted"]
    return {"lineages": lineages, "attempts": len(at), "accepted": len(accepted),
            "accept_rate": rate(len(accepted), lineages),
            "build_pct": rate(sum(bool(a.built) for a in reached_build), len(reached_build)),
            "oracle_pass_pct": rate(len(passed_oracle), len(reached_oracle)),
            "nop_fail_pct": rate(sum(a.nop_reward == 0 for a in reached_nop), len(reached_nop)),
            "rubric_pass_pct": rate(sum(bool(a.rubric_pass) for a in reached_rubric), len(reached_rubric)),
            "rounds_per_accepted": rate(sum(a.round for a in accepted), len(accepted)),
            "accepted_built_pct": rate(sum(bool(a.built) for a in accepted), len(accepted)),
            "rejected_by_stage": dict(Counter(a.stage for a in at if a.stage != "accepted").most_common())}


def synthesize(ctx, cfg: SynthConfig, out: Path, prompts: list[tuple[str, str]], stub_check: bool,
               log: Callable[[str], None] = print) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "attempts.jsonl").unlink(missing_ok=True)
    s = Synthesizer(ctx, cfg, out, log, stub_check=stub_check)
    for lineage, prompt in prompts:
        s.lineage(lineage, prompt)
    m = metrics(s.result, len(prompts))
    atomic_write_text(out / "metrics.json", json.dumps(m, indent=1))
    return m


def seed_prompts(seeds: list[HarborTask], n: int, cfg: SynthConfig) -> list[tuple[str, str]]:
    rng = random.Random(cfg.seed)
    picks = [seeds[rng.randrange(len(seeds))] for _ in range(n)]
    return [(f"seed{i:03d}-{slug(t.name.split('/')[-1])[:30]}", seed_prompt(t, cfg.base_image))
            for i, t in enumerate(picks)]


def doc_prompts(docs: list[tuple[str, str, str]], n: int, cfg: SynthConfig, chars: int = 3000) -> list[tuple[str, str]]:
    rng = random.Random(cfg.seed)
    picks = [docs[rng.randrange(len(docs))] for _ in range(n)]
    return [(f"doc{i:03d}-{slug(doc_id)[:30]}", DOC_PROMPT.format(base=cfg.base_image, title=title, text=text[:chars]))
            for i, (doc_id, title, text) in enumerate(picks)]
